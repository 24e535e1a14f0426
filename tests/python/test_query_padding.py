"""q_variable_block_sizes: padding query rows of block_sparse_attn (forward, backward,
validation) and of the VSA layer, against the float64 references, on the CPU (CI) and on
CUDA where a GPU is (gpu-marked).

Rows at offset >= q_variable_block_sizes[i] of query block i are padding: out 0, lse the
empty-row sentinel, dq 0, nothing added to dk/dv. Their q and dout rows hold garbage here
(512 times random values: finite, as the contract asks, and far from any real row's), so
a padding row that leaked into a result would show.
"""

import pytest
import torch

import vsa
from attention_reference import EMPTY_ROW_LSE, TOLERANCE, make_problem, reference_attention, rel_error
from layer_reference import draw_clear_problem, reference_layer

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
GARBAGE = 512.0


def _cuts(block):
    """Each side of the 16-row fragment and 64-row tile edges, none, all."""
    return [0, 1, 15, 16, 17, 63, 64] if block == 64 else [0, 1, 63, 64, 65, 127, 128]


def _padded_problem(gen, device, *, nq=7, **case):
    """A problem whose query block i keeps the i-th cut of its rows (from a random start),
    with garbage in the padding rows of q; returns (problem, q_vbs, padding mask [Sq])."""
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    p = make_problem(gen, nq=nq, dtype=dtype, **case)
    block = p.k.shape[2 if p.layout == "bhsd" else 1] // p.vbs.numel()
    cuts = _cuts(block)
    start = int(torch.randint(0, len(cuts), (1,), generator=gen))
    q_vbs = torch.tensor([cuts[(start + i) % len(cuts)] for i in range(nq)]).to(p.vbs.dtype)
    padding = torch.arange(block)[None, :] >= q_vbs.long()[:, None]
    padding = padding.reshape(-1)
    q = p.q.clone()
    _scale_rows(q, p.layout, padding, GARBAGE)
    p = p.with_(q=q)
    moved = p.with_(**{name: getattr(p, name).to(device) for name in ("q", "k", "v", "q2k_idx", "q2k_num", "vbs")})
    return moved, q_vbs.to(device), padding.to(device)


def _scale_rows(t, layout, mask, factor):
    """Multiplies t's sequence rows in mask by factor, in place."""
    if layout == "bhsd":
        t[:, :, mask] *= factor
    else:
        t[:, mask] *= factor


def _seq(t, layout, mask):
    """t's rows of the sequence positions in mask, as [B, H, n, ...] (lse: [B, H, n])."""
    return t[:, :, mask] if layout == "bhsd" or t.dim() == 3 else t[:, mask].transpose(1, 2)


CASES = [
    dict(),
    dict(layout="bshd", heads=4, kv_heads=2),
    dict(block=128, nq=7, nk=3, dim=128, index_dtype=torch.int64),
    dict(batch=2, duplicates=True, max_kv=4),
]


def _ids(c):
    return ",".join(f"{k}={v}" for k, v in c.items()) or "default"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_forward_padding_rows_are_empty(gen, device, case):
    p, q_vbs, padding = _padded_problem(gen, device, **case)
    out, lse = vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists, layout=p.layout, q_variable_block_sizes=q_vbs)
    ref_out, ref_lse = reference_attention(p.q, p.k, p.v, *p.lists, layout=p.layout, q_vbs=q_vbs)
    assert rel_error(out, ref_out) <= TOLERANCE[p.q.dtype]
    pad_out = _seq(out, p.layout, padding)
    assert torch.equal(pad_out, torch.zeros_like(pad_out))
    assert torch.all(_seq(lse, p.layout, padding) == EMPTY_ROW_LSE)
    real = ref_lse != EMPTY_ROW_LSE
    tol = 1e-4 if p.q.dtype == torch.float32 else 5e-2
    assert torch.allclose(lse[real].double(), ref_lse[real], rtol=0, atol=tol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_backward_padding_rows_get_zero_dq_and_add_nothing(gen, device, case):
    p, q_vbs, padding = _padded_problem(gen, device, **case)
    dout = torch.randn(p.q.shape, dtype=torch.float64, generator=gen).to(device)
    _scale_rows(dout, p.layout, padding, GARBAGE)  # finite garbage where nothing may read it

    def grads(fn, q, k, v, upstream):
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        fn(q, k, v).backward(upstream)
        return q.grad, k.grad, v.grad

    got = grads(lambda q, k, v: vsa.block_sparse_attn(q, k, v, *p.lists, layout=p.layout,
                                                      q_variable_block_sizes=q_vbs)[0],
                p.q, p.k, p.v, dout.to(p.q.dtype))
    want = grads(lambda q, k, v: reference_attention(q, k, v, *p.lists, layout=p.layout, q_vbs=q_vbs)[0],
                 p.q.double(), p.k.double(), p.v.double(), dout)
    tol = 1e-4 if p.q.dtype == torch.float32 else 2e-2
    for name, g, w in zip("qkv", got, want):
        assert rel_error(g, w) <= tol, name
    pad_dq = _seq(got[0], p.layout, padding)
    assert torch.equal(pad_dq, torch.zeros_like(pad_dq))


def test_real_rows_match_the_call_without(gen):
    """Real rows get what they get without q_variable_block_sizes, to the rounding of the
    CPU's products over fewer rows."""
    p, q_vbs, padding = _padded_problem(gen, "cpu", heads=4, kv_heads=2)
    with_out, with_lse = vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists, q_variable_block_sizes=q_vbs)
    out, lse = vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists)
    real = ~padding
    assert rel_error(with_out[:, :, real], out[:, :, real]) <= 1e-6
    assert rel_error(with_lse[:, :, real], lse[:, :, real]) <= 1e-6


@pytest.mark.parametrize("bad, argument", [
    (lambda q_vbs: q_vbs[:-1], "q_variable_block_sizes.shape"),
    (lambda q_vbs: q_vbs.float(), "q_variable_block_sizes.dtype"),
    (lambda q_vbs: q_vbs[None], "q_variable_block_sizes"),
    (lambda q_vbs: q_vbs.to("meta"), "q_variable_block_sizes.device"),
    (lambda q_vbs: torch.full_like(q_vbs, 65), "q_variable_block_sizes"),
    (lambda q_vbs: torch.full_like(q_vbs, -1), "q_variable_block_sizes"),
], ids=["length", "dtype", "rank", "device", "above-blk", "negative"])
def test_bad_q_variable_block_sizes_are_refused(gen, bad, argument):
    p, q_vbs, _ = _padded_problem(gen, "cpu", nq=2, nk=3)
    with pytest.raises(ValueError, match=f"'{argument}'"):
        vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists, q_variable_block_sizes=bad(q_vbs))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("gated", [True, False])
def test_layer_padding_rows_are_coarse_times_gate(gen, device, gated):
    """The layer passes its q_variable_block_sizes to the fine stage: a pad token's output is
    coarse · gate (coarse without a gate), on the fused inference path and on the training one."""
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    p = draw_clear_problem(gen, dtype=dtype, nq=4, nk=4, gated=gated).to(device)  # q_vbs drawn in [1, 64]
    assert bool((p.q_vbs < 64).any()), "no pad token drawn"
    want, _, _, _ = reference_layer(*p.inputs(), p.gate, block=p.block, layout=p.layout)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    for grad in (False, True):
        q = p.q.detach().requires_grad_(grad)
        out = vsa.video_sparse_attn(q, p.k, p.v, p.vbs, p.q_vbs, p.topk, p.block, p.gate, layout=p.layout)
        out = out.detach()
        assert rel_error(out, want) <= tol, f"requires_grad={grad}"
        padding = (torch.arange(64, device=device)[None, :] >= p.q_vbs[:, None]).reshape(-1)
        assert rel_error(out[:, :, padding], want[:, :, padding]) <= tol, f"padding rows, requires_grad={grad}"
