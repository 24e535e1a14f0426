"""vsa.block_sparse_attn forward on the CPU backend against the float64 reference,
on every edge case of the op contract (README.md, "The op contract")."""

import pytest
import torch

import vsa
from vsa import _C
from attention_reference import (EMPTY_ROW_LSE, TOLERANCE, make_problem, reference_attention,
                                 rel_error)


def run_and_compare(p, *, scale=None, dtype=torch.float32):
    out, lse = vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists, scale=scale, layout=p.layout)
    ref_out, ref_lse = reference_attention(p.q, p.k, p.v, *p.lists, scale=scale, layout=p.layout)
    assert out.shape == p.q.shape and out.dtype == p.q.dtype
    assert rel_error(out, ref_out) <= TOLERANCE[dtype]
    empty = ref_lse == EMPTY_ROW_LSE
    assert torch.equal(lse[empty], torch.full_like(lse[empty], EMPTY_ROW_LSE))
    lse_tol = 1e-4 if dtype == torch.float32 else 5e-2
    assert torch.allclose(lse[~empty].double(), ref_lse[~empty], rtol=0, atol=lse_tol)
    return out, lse, ref_lse


def test_sentinel_matches_contract():
    assert vsa.EMPTY_ROW_LSE == pytest.approx(EMPTY_ROW_LSE)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_matches_reference(gen, layout, dtype):
    p = make_problem(gen, batch=2, heads=2, nq=3, nk=4, dtype=dtype, layout=layout)
    run_and_compare(p, dtype=dtype)


@pytest.mark.parametrize("case", [
    dict(nq=3, nk=2),  # odd NQ, NQ != NK
    dict(nq=1, nk=5, max_kv=2),  # lists shorter than NK
    dict(heads=4, kv_heads=2),  # GQA
    dict(heads=4, kv_heads=1, layout="bshd"),  # MQA, BSHD
    dict(block=128, nq=2, nk=2),
    dict(dim=128),
    dict(index_dtype=torch.int64),
    dict(index_dtype=torch.int16),  # any integer dtype is accepted
    dict(index_dtype=torch.uint8),
    dict(duplicates=True, max_kv=5),  # a block listed twice is attended twice
], ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_edge_cases(gen, case):
    run_and_compare(make_problem(gen, **case))


def test_count_zero_and_empty_blocks_give_zero_rows(gen):
    p = make_problem(gen, nq=3, nk=3, vbs=[64, 0, 17])
    p.q2k_num[0, 0, 0] = 0  # nothing listed
    p.q2k_idx[0, 0, 1, 0], p.q2k_num[0, 0, 1] = 1, 1  # only a block with no valid keys
    out, lse, ref_lse = run_and_compare(p)
    for row in (0, 1):
        rows = slice(row * 64, (row + 1) * 64)
        assert torch.equal(out[0, 0, rows], torch.zeros_like(out[0, 0, rows]))
        assert torch.all(lse[0, 0, rows] == EMPTY_ROW_LSE)
    assert torch.isfinite(lse).all()


def test_padding_after_count_is_never_read(gen):
    p = make_problem(gen, nq=2, nk=3, min_count=1)
    listed = torch.arange(p.q2k_idx.shape[-1]) < p.q2k_num[..., None]
    garbage = p.q2k_idx.masked_fill(~listed, 10**6)  # far out of range, past the count
    out_pad, _ = vsa.block_sparse_attn(p.q, p.k, p.v, p.q2k_idx, p.q2k_num, p.vbs)
    out_garbage, _ = vsa.block_sparse_attn(p.q, p.k, p.v, garbage, p.q2k_num, p.vbs)
    assert torch.equal(out_pad, out_garbage)


def test_unsorted_lists_equal_sorted(gen):
    p = make_problem(gen, nq=2, nk=4, min_count=2)
    listed = torch.arange(p.q2k_idx.shape[-1]) < p.q2k_num[..., None]
    keyed = p.q2k_idx.masked_fill(~listed, 1 << 20).sort(dim=-1).values
    sorted_idx = keyed.masked_fill(keyed == 1 << 20, -1)
    out_a, lse_a = vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists)
    out_b, lse_b = vsa.block_sparse_attn(p.q, p.k, p.v, sorted_idx, p.q2k_num, p.vbs)
    assert rel_error(out_a, out_b) <= 1e-6
    assert torch.allclose(lse_a, lse_b, rtol=0, atol=1e-5)


def test_scale(gen):
    run_and_compare(make_problem(gen), scale=0.3)


def test_need_lse_false_returns_none_and_same_out(gen):
    p = make_problem(gen)
    out, lse = vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists, need_lse=False)
    assert lse is None
    assert torch.equal(out, vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists)[0])


def test_strided_views_are_read_in_place(gen):
    # Heads sliced out of a wider tensor: any strides, unit stride on D.
    p = make_problem(gen, heads=4)
    wide = torch.randn(1, 8, p.q.shape[2], 64, generator=gen)
    q = wide[:, ::2]
    assert not q.is_contiguous() and q.stride(-1) == 1
    run_and_compare(p.with_(q=q))


def test_non_unit_head_stride_is_copied(gen):
    p = make_problem(gen)
    k = p.k.transpose(-1, -2).contiguous().transpose(-1, -2)  # same values, D stride != 1
    assert k.stride(-1) != 1
    run_and_compare(p.with_(k=k))


def test_bshd_output_keeps_layout(gen):
    p = make_problem(gen, layout="bshd", heads=3, nq=2)
    out, lse = vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists, layout="bshd")
    assert out.shape == p.q.shape and lse.shape == (1, 3, 128)


def test_binding_writes_every_output_element(gen):
    """Outputs poisoned with NaN before the call: every element must be overwritten."""
    p = make_problem(gen, batch=2, nq=3, nk=3)
    p.q2k_num[0, 0, 0] = 0  # an empty row must be written too
    out = torch.full_like(p.q, float("nan"))
    lse = torch.full((2, 2, 192), float("nan"))
    _C.forward(p.q, p.k, p.v, p.q2k_idx, p.q2k_num, p.vbs, None, out, lse, "bhsd", 0.0, True, 0)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    ref_out, _ = reference_attention(p.q, p.k, p.v, *p.lists)
    assert rel_error(out, ref_out) <= 1e-5


def test_fresh_inputs_are_not_degenerate(gen):
    # Guards the other tests: random problems attend to something and differ per draw.
    p = make_problem(gen, nq=3, min_count=1)
    out, _, _ = run_and_compare(p)
    assert out.abs().sum() > 0
    assert not torch.equal(p.q, make_problem(gen, nq=3).q)
