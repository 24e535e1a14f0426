"""The torch integration on CUDA tensors: streams, no host syncs, the CPU fallback,
device checks. Marked `gpu`: skipped without a CUDA GPU (and without CUDA kernels
where they are needed)."""

import contextlib

import pytest
import torch

import vsa
from attention_reference import TOLERANCE, make_problem, reference_attention, rel_error

pytestmark = pytest.mark.gpu
needs_kernels = pytest.mark.skipif(not vsa.cuda_compiled(), reason="built without CUDA kernels")


def on_cuda(p):
    return p.with_(**{name: getattr(p, name).cuda() for name in
                      ("q", "k", "v", "q2k_idx", "q2k_num", "vbs")})


@contextlib.contextmanager
def syncs_are_errors():
    """torch raises on any synchronizing CUDA call made through it (.item(), nonzero, ...)."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_is_supported_never_syncs(gen, monkeypatch):
    p = on_cuda(make_problem(gen, dtype=torch.bfloat16))

    def forbidden(*args, **kwargs):
        raise AssertionError("is_supported synchronized the device")

    monkeypatch.setattr(torch.cuda, "synchronize", forbidden)
    with syncs_are_errors():
        support = vsa.is_supported(p.q, p.k, p.v, p.vbs, p.q2k_idx, p.q2k_num)
    assert bool(support) == vsa.cuda_compiled(), support.reason


@needs_kernels
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_forward_matches_reference_without_syncs(gen, layout):
    p = make_problem(gen, batch=2, heads=4, kv_heads=2, nq=3, nk=4, dtype=torch.bfloat16,
                     layout=layout, index_dtype=torch.int16)
    g = on_cuda(p)
    with syncs_are_errors():
        out, lse = vsa.block_sparse_attn(g.q, g.k, g.v, *g.lists, layout=layout)
    ref_out, _ = reference_attention(p.q, p.k, p.v, *p.lists, layout=layout)
    assert out.is_cuda and out.shape == g.q.shape
    assert rel_error(out.cpu(), ref_out) <= TOLERANCE[torch.bfloat16]


@needs_kernels
def test_runs_on_the_current_stream(gen):
    g = on_cuda(make_problem(gen, dtype=torch.bfloat16))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        out, _ = vsa.block_sparse_attn(g.q, g.k, g.v, *g.lists)
    side.synchronize()
    default, _ = vsa.block_sparse_attn(g.q, g.k, g.v, *g.lists)
    torch.testing.assert_close(out, default)


@needs_kernels
def test_misaligned_rows_are_copied(gen):
    p = make_problem(gen, dtype=torch.bfloat16)
    g = on_cuda(p)
    storage = torch.empty(g.q.numel() + 1, dtype=g.q.dtype, device="cuda")
    q = storage[1:].view(g.q.shape).copy_(g.q)  # starts 2 bytes past an aligned address
    out, _ = vsa.block_sparse_attn(q, g.k, g.v, *g.lists)
    ref_out, _ = reference_attention(p.q, p.k, p.v, *p.lists)
    assert rel_error(out.cpu(), ref_out) <= TOLERANCE[torch.bfloat16]


def test_cpu_backend_fallback_on_cuda_tensors(gen, monkeypatch):
    monkeypatch.setenv("VSA_BACKEND", "cpu")
    p = make_problem(gen, dtype=torch.bfloat16)
    g = on_cuda(p)
    out, lse = vsa.block_sparse_attn(g.q, g.k, g.v, *g.lists)
    assert out.is_cuda and lse.is_cuda
    cpu_out, cpu_lse = vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists)
    assert torch.equal(out.cpu(), cpu_out) and torch.equal(lse.cpu(), cpu_lse)
    assert vsa.is_supported(g.q, g.k, g.v, g.vbs)


def test_device_mismatch_is_named(gen):
    g = on_cuda(make_problem(gen, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="'variable_block_sizes.device'"):
        vsa.block_sparse_attn(g.q, g.k, g.v, g.q2k_idx, g.q2k_num, g.vbs.cpu())


@needs_kernels
def test_compile_fullgraph_on_cuda(gen):
    g = on_cuda(make_problem(gen, dtype=torch.bfloat16))
    torch._dynamo.reset()

    def step(q, k, v, idx, num, vbs):
        return vsa.block_sparse_attn(q * 2, k, v, idx, num, vbs, need_lse=False)[0].relu()

    with torch.no_grad():
        got = torch.compile(step, fullgraph=True, backend="aot_eager")(g.q, g.k, g.v, *g.lists)
    torch.testing.assert_close(got, step(g.q, g.k, g.v, *g.lists))


@needs_kernels
def test_cuda_graph_capture_and_replay(gen):
    """The op enqueues work on the current stream and nothing else, so a CUDA
    graph captures it; replays recompute from whatever the inputs now hold."""
    g = on_cuda(make_problem(gen, dtype=torch.bfloat16))
    q = g.q.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside capture, as CUDA graphs require
        vsa.block_sparse_attn(q, g.k, g.v, *g.lists)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured, _ = vsa.block_sparse_attn(q, g.k, g.v, *g.lists)
    q.copy_(torch.randn_like(q))
    graph.replay()
    eager, _ = vsa.block_sparse_attn(q, g.k, g.v, *g.lists)
    torch.testing.assert_close(captured, eager)
