"""Variable-length batches (vsa.block_sparse_attn_varlen, vsa.pack_varlen_index):
several videos packed in one sequence must give, forward and backward, what
each video gives alone, and that must match the float64 reference."""

import functools

import pytest
import torch

import vsa
from attention_reference import TOLERANCE, make_problem, reference_attention, rel_error


def seq_axis(layout):
    return 2 if layout == "bhsd" else 1


def draw_videos(gen, sizes, *, dtype=torch.float32, **spec):
    """One problem per (nq, nk) in sizes, each with partial blocks and its own local lists."""
    return [make_problem(gen, nq=nq, nk=nk, dtype=dtype, **spec) for nq, nk in sizes]


def packed(videos, device):
    """The videos back to back: q/k/v, local lists, vbs, and the block offsets."""
    axis = seq_axis(videos[0].layout)
    cat = lambda name, dim: torch.cat([getattr(p, name) for p in videos], dim=dim).to(device)  # noqa: E731
    cu_q = torch.tensor([0] + [p.q2k_num.shape[2] for p in videos]).cumsum(0)
    cu_kv = torch.tensor([0] + [p.vbs.numel() for p in videos]).cumsum(0)
    max_kv = max(p.q2k_idx.shape[3] for p in videos)
    idx = torch.cat([torch.nn.functional.pad(p.q2k_idx, (0, max_kv - p.q2k_idx.shape[3]), value=-1)
                     for p in videos], dim=2).to(device)
    return (cat("q", axis), cat("k", axis), cat("v", axis), idx, cat("q2k_num", 2), cat("vbs", 0),
            cu_q.to(device), cu_kv.to(device))


def run_with_grads(fn, q, k, v, dout):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v)
    out.backward(dout)
    return [out.detach(), q.grad, k.grad, v.grad]


def alone_then_joined(videos, douts, fn, device):
    """Per-video (out, dq, dk, dv) of fn, joined along the sequence axis like the packing."""
    axis = seq_axis(videos[0].layout)
    parts = [run_with_grads(lambda q, k, v, p=p: fn(q, k, v, p), p.q.to(device), p.k.to(device),
                            p.v.to(device), d.to(device)) for p, d in zip(videos, douts)]
    return [torch.cat([part[n] for part in parts], dim=axis) for n in range(4)]


def gradient_error(actual, expected, incoming) -> float:
    """rel_error, except against a reference gradient that is zero by cancellation (every row
    that attends anything has one valid key, which takes all the weight: dS = 0 exactly): then
    the error is measured against the incoming gradient's norm, as float32 leaves ~1e-7 of the
    terms that cancel."""
    if expected.double().norm() <= 1e-6 * incoming.double().norm():
        return float((actual.double() - expected.double()).norm() / incoming.double().norm())
    return rel_error(actual, expected)


def check_varlen(videos, device, tol):
    q, k, v, idx, num, vbs, cu_q, cu_kv = packed(videos, device)
    layout = videos[0].layout
    douts = [torch.randn(p.q.shape, dtype=torch.float64) for p in videos]
    dout = torch.cat(douts, dim=seq_axis(layout)).to(device=device, dtype=q.dtype)
    got = run_with_grads(lambda q_, k_, v_: vsa.block_sparse_attn_varlen(
        q_, k_, v_, idx, num, vbs, cu_q, cu_kv, layout=layout)[0], q, k, v, dout)
    alone = alone_then_joined(videos, [d.to(q.dtype) for d in douts], lambda q_, k_, v_, p: vsa.block_sparse_attn(
        q_, k_, v_, p.q2k_idx.to(device), p.q2k_num.to(device), p.vbs.to(device), layout=layout)[0], device)
    exact = alone_then_joined(videos, douts, lambda q_, k_, v_, p: reference_attention(
        q_.double(), k_.double(), v_.double(), *p.lists, layout=layout)[0], "cpu")
    incoming = torch.cat(douts, dim=seq_axis(layout))
    for name, g, a, x in zip(("out", "dq", "dk", "dv"), got, alone, exact):
        assert g.shape == a.shape and g.dtype == a.dtype, name
        error = rel_error if name == "out" else functools.partial(gradient_error, incoming=incoming)
        assert error(g.cpu(), a.cpu()) <= tol, f"{name}: packed vs each video alone"
        assert error(g.cpu(), x) <= tol, f"{name}: packed vs the float64 reference"


SIZES = [
    [(2, 3), (3, 2), (1, 4)],  # different lengths both ways
    [(3, 3)],  # one video: the plain op
    [(1, 1), (2, 5), (1, 1), (4, 2)],
]
SPECS = [
    dict(),
    dict(layout="bshd", batch=2),
    dict(heads=4, kv_heads=2, index_dtype=torch.int64),
    dict(duplicates=True, max_kv=4),  # lists of different widths, padded when packed
    dict(block=128, dim=128),
]


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "x".join(f"{a}-{b}" for a, b in s))
@pytest.mark.parametrize("spec", SPECS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
def test_packed_videos_match_each_alone_cpu(gen, sizes, spec):
    videos = draw_videos(gen, sizes, **spec)
    videos[0].q2k_num.view(-1)[0] = 0  # an empty row stays empty (zero out, zero gradient)
    check_varlen(videos, "cpu", 1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "x".join(f"{a}-{b}" for a, b in s))
@pytest.mark.parametrize("spec", SPECS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
def test_packed_videos_match_each_alone_cuda(gen, sizes, spec):
    videos = draw_videos(gen, sizes, dtype=torch.bfloat16, **spec)
    check_varlen(videos, "cuda", TOLERANCE[torch.bfloat16])


def local_lists_case():
    """Two videos, query blocks [0, 2) and [2, 3), KV blocks [0, 3) and [3, 5)."""
    idx = torch.tensor([[[[2, 0], [1, -1], [1, 7]]]])
    num = torch.tensor([[[2, 1, 1]]])
    return idx, num, torch.tensor([0, 2, 3]), torch.tensor([0, 3, 5])


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_pack_varlen_index_moves_ids_by_their_video(device):
    idx, num, cu_q, cu_kv = (t.to(device) for t in local_lists_case())
    got = vsa.pack_varlen_index(idx, num, cu_q, cu_kv.to(torch.int32))
    assert got.dtype == torch.int32 and got.device.type == device
    assert got.cpu().tolist() == [[[[2, 0], [1, -1], [4, -1]]]]


@pytest.mark.parametrize("change,argument", [
    (lambda idx, num, cu_q, cu_kv: (idx.index_put_((torch.tensor(0),) * 3 + (torch.tensor(0),),
                                                   torch.tensor(3)), num, cu_q, cu_kv), "'local_idx'"),
    (lambda idx, num, cu_q, cu_kv: (idx, num, torch.tensor([0, 2, 4]), cu_kv), "'cu_q_blocks'"),
    (lambda idx, num, cu_q, cu_kv: (idx, num, cu_q, torch.tensor([1, 3, 5])), "'cu_kv_blocks'"),
    (lambda idx, num, cu_q, cu_kv: (idx, num, cu_q, torch.tensor([0, 5])), "'cu_kv_blocks.shape'"),
    (lambda idx, num, cu_q, cu_kv: (idx, num.fill_(3), cu_q, cu_kv), "'q2k_num'"),
    (lambda idx, num, cu_q, cu_kv: (idx, num, cu_q.float(), cu_kv), "'cu_q_blocks.dtype'"),
    (lambda idx, num, cu_q, cu_kv: (idx, num, cu_q.to("meta"), cu_kv), "'cu_q_blocks.device'"),
], ids=["id outside its video", "last offset not NQ", "offsets not from 0", "offset count",
        "count > max_kv", "float offsets", "offsets on meta"])
def test_bad_varlen_lists_raise_named_errors(change, argument):
    with pytest.raises(ValueError) as info:
        vsa.pack_varlen_index(*change(*local_lists_case()))
    assert argument in str(info.value) and "expected" in str(info.value), str(info.value)


@pytest.mark.parametrize("wide", ["cu_q_blocks", "cu_kv_blocks"])
def test_offsets_of_two_dtypes_are_not_narrowed(wide):
    # cu_kv_blocks reached the core in cu_q_blocks' dtype: with int32 cu_q_blocks, an int64
    # offset of 2^32 + 3 became 3, so offsets that decrease passed as the valid [0, 3, 5].
    idx, num, cu_q, cu_kv = local_lists_case()
    cu_q, cu_kv = cu_q.to(torch.int32), cu_kv.to(torch.int32)
    if wide == "cu_q_blocks":
        cu_q = cu_q.long() + torch.tensor([0, 2**32, 0])
    else:
        cu_kv = cu_kv.long() + torch.tensor([0, 2**32, 0])
    with pytest.raises(ValueError, match=f"'{wide}': expected non-decreasing"):
        vsa.pack_varlen_index(idx, num, cu_q, cu_kv)


def test_varlen_attention_refuses_lists_escaping_their_video(gen):
    # Id 2 is a valid packed block (video 1's first) but not one of video 0's two blocks.
    videos = draw_videos(gen, [(1, 2), (1, 2)])
    q, k, v, idx, num, vbs, cu_q, cu_kv = packed(videos, "cpu")
    idx[0, 0, 0, 0], num[0, 0, 0] = 2, 1
    with pytest.raises(ValueError, match="'local_idx'"):
        vsa.block_sparse_attn_varlen(q, k, v, idx, num, vbs, cu_q, cu_kv)


def test_varlen_attention_refuses_offsets_past_the_kv_blocks(gen):
    # The packed lists would name blocks past k and v: refused by name before any kernel runs.
    videos = draw_videos(gen, [(1, 2), (1, 2)])
    q, k, v, idx, num, vbs, cu_q, cu_kv = packed(videos, "cpu")
    with pytest.raises(ValueError, match="'cu_kv_blocks'.*NK = 4.*ends at 5"):
        vsa.block_sparse_attn_varlen(q, k, v, idx, num, vbs, cu_q, cu_kv + torch.tensor([0, 1, 1]))


def test_varlen_attention_names_offsets_of_the_wrong_rank(gen):
    videos = draw_videos(gen, [(1, 2), (1, 2)])
    q, k, v, idx, num, vbs, cu_q, cu_kv = packed(videos, "cpu")
    with pytest.raises(ValueError, match="'cu_kv_blocks': expected rank 1"):
        vsa.block_sparse_attn_varlen(q, k, v, idx, num, vbs, cu_q, cu_kv[None])


def test_varlen_attention_names_block_sizes_of_the_wrong_rank(gen):
    # The offsets check read vbs.shape[0] first: a 0-d vbs raised 'tuple index out of range'.
    videos = draw_videos(gen, [(1, 1)])
    q, k, v, idx, num, vbs, cu_q, cu_kv = packed(videos, "cpu")
    with pytest.raises(ValueError, match="'variable_block_sizes': expected rank 1"):
        vsa.block_sparse_attn_varlen(q, k, v, idx, num, vbs[0], cu_q, cu_kv)


def test_varlen_compiles_fullgraph(gen):
    """The list packing is an op of its own: torch.compile captures it with the attention."""
    videos = draw_videos(gen, [(2, 3), (1, 2)])
    q, k, v, idx, num, vbs, cu_q, cu_kv = packed(videos, "cpu")
    step = lambda q_, k_, v_: vsa.block_sparse_attn_varlen(q_, k_, v_, idx, num, vbs, cu_q, cu_kv)[0]  # noqa: E731
    torch._dynamo.reset()
    try:
        compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
        q_c, q_e = q.clone().requires_grad_(), q.clone().requires_grad_()
        out = compiled(q_c, k, v)
        out.sum().backward()
        want = step(q_e, k, v)
        want.sum().backward()
    finally:
        torch._dynamo.reset()
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(q_c.grad, q_e.grad)
