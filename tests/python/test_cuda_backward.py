"""The CUDA backward through torch: autograd of vsa.block_sparse_attn against the float64
reference, for both CUDA kernels; no host syncs; torch.compile(fullgraph=True) of forward +
backward; a whole training step (forward, backward, optimizer step) replayed as a CUDA graph.
Marked `gpu`: skipped without a CUDA GPU."""

import pytest
import torch

import vsa
from attention_reference import make_problem, reference_attention, rel_error

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not vsa.cuda_compiled(), reason="built without CUDA kernels")]

KERNELS = ["default", "sm80"]  # the kernel kernel_choice picks, and the portable one


@pytest.fixture(params=KERNELS)
def kernel(request, monkeypatch):
    if request.param == "sm80":
        monkeypatch.setenv("VSA_CUDA_KERNEL", "sm80")
    return request.param


def cuda_problem(gen, **case):
    p = make_problem(gen, dtype=case.pop("dtype", torch.bfloat16), **case)
    return p, p.with_(**{name: getattr(p, name).cuda() for name in
                         ("q", "k", "v", "q2k_idx", "q2k_num", "vbs")})


def gradients(fn, q, k, v, dout):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    fn(q, k, v).backward(dout)
    return q.grad, k.grad, v.grad


def check_against_reference(p, g, *, layout="bhsd", scale=None, deterministic=False, tol=2e-2):
    dout = torch.randn(p.q.shape).to(g.q.dtype)
    got = gradients(lambda q, k, v: vsa.block_sparse_attn(q, k, v, *g.lists, scale=scale,
                                                          layout=layout,
                                                          deterministic=deterministic)[0],
                    g.q, g.k, g.v, dout.cuda())
    want = gradients(lambda q, k, v: reference_attention(q, k, v, *p.lists, scale=scale,
                                                         layout=layout)[0],
                     p.q.double(), p.k.double(), p.v.double(), dout.double())
    for name, a, b, like in zip("qkv", got, want, (g.q, g.k, g.v)):
        assert a.is_cuda and a.shape == like.shape and a.dtype == like.dtype, name
        assert rel_error(a.cpu(), b) <= tol, f"d{name}"


@pytest.mark.parametrize("case", [
    dict(),
    dict(layout="bshd", batch=2),
    dict(heads=4, kv_heads=2),
    dict(heads=3, kv_heads=1, layout="bshd"),
    dict(nq=3, nk=2, vbs=[64, 9]),
    dict(index_dtype=torch.int64, duplicates=True, max_kv=4),
    dict(index_dtype=torch.int16),
    dict(block=128, nq=2, nk=3, dim=128, vbs=[128, 70, 0]),
    dict(dim=128, dtype=torch.float16),
], ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
@pytest.mark.parametrize("deterministic", [False, True], ids=["dq_atomic", "dq_pass"])
def test_grads_match_reference(gen, kernel, case, deterministic):
    layout = case.get("layout", "bhsd")
    p, g = cuda_problem(gen, **case)
    p.q2k_num[0, 0, 0] = 0  # an empty row: zero dq, and nothing of it anywhere else
    g.q2k_num[0, 0, 0] = 0
    check_against_reference(p, g, layout=layout, deterministic=deterministic)


def test_grads_with_scale(gen, kernel):
    p, g = cuda_problem(gen)
    check_against_reference(p, g, scale=0.2)


def test_strided_views_are_read_in_place(gen):
    """q, k, v as slices of a packed [B, S, 3, H, D] tensor (bshd views, gaps between rows)."""
    p, g = cuda_problem(gen, layout="bshd", nq=3, nk=3)
    packed = torch.stack([g.q, g.k, g.v], dim=2)  # [B, S, 3, H, D]
    q, k, v = packed.unbind(2)
    assert not q.is_contiguous()
    dout = torch.randn_like(q)
    leaf = packed.detach().requires_grad_()
    out = vsa.block_sparse_attn(*leaf.unbind(2), *g.lists, layout="bshd")[0]
    out.backward(dout)
    want = gradients(lambda q, k, v: vsa.block_sparse_attn(q, k, v, *g.lists, layout="bshd")[0],
                     q.contiguous(), k.contiguous(), v.contiguous(), dout)
    for got, ref in zip(leaf.grad.unbind(2), want):
        torch.testing.assert_close(got, ref, atol=2e-2, rtol=0)


def test_backward_never_syncs(gen):
    _, g = cuda_problem(gen, heads=4, kv_heads=2)
    q = g.q.detach().requires_grad_()
    out = vsa.block_sparse_attn(q, g.k, g.v, *g.lists)[0]
    dout = torch.randn_like(out)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out.backward(dout)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(q.grad).all()


def test_dk_dv_repeat_bit_for_bit_and_dq_when_deterministic(gen, kernel):
    _, g = cuda_problem(gen, heads=4, kv_heads=2, nq=4, nk=4, dim=128, duplicates=True, max_kv=6)
    dout = torch.randn(g.q.shape, device="cuda", dtype=g.q.dtype)

    def run(**kw):
        return gradients(lambda q, k, v: vsa.block_sparse_attn(q, k, v, *g.lists, **kw)[0],
                         g.q, g.k, g.v, dout)

    first, second = run(), run()
    assert torch.equal(first[1], second[1]) and torch.equal(first[2], second[2])
    torch.testing.assert_close(first[0], second[0], atol=1e-2, rtol=0)  # dq: float atomics
    exact = run(deterministic=True)
    assert all(torch.equal(a, b) for a, b in zip(exact, run(deterministic=True)))
    torch.testing.assert_close(exact[0], first[0], atol=1e-2, rtol=0)


def test_deterministic_follows_torch_setting(gen):
    _, g = cuda_problem(gen, nq=3, nk=3, dim=128)
    dout = torch.randn(g.q.shape, device="cuda", dtype=g.q.dtype)
    torch.use_deterministic_algorithms(True)
    try:
        runs = [gradients(lambda q, k, v: vsa.block_sparse_attn(q, k, v, *g.lists)[0],
                          g.q, g.k, g.v, dout)[0] for _ in range(3)]
    finally:
        torch.use_deterministic_algorithms(False)
    assert torch.equal(runs[0], runs[1]) and torch.equal(runs[0], runs[2])


class Block(torch.nn.Module):
    """Projections around the sparse attention: what a training step differentiates."""

    def __init__(self, dim):
        super().__init__()
        self.q = torch.nn.Linear(dim, dim, dtype=torch.bfloat16)
        self.o = torch.nn.Linear(dim, dim, dtype=torch.bfloat16)

    def forward(self, x, kv, lists, vbs):
        out = vsa.block_sparse_attn(self.q(x), kv, kv, *lists, vbs, need_lse=False)[0]
        return self.o(out)


def test_compile_fullgraph_forward_and_backward(gen):
    torch._dynamo.reset()
    _, g = cuda_problem(gen, nq=2, nk=3, min_count=1)
    model = Block(g.q.shape[-1]).cuda()
    compiled = torch.compile(model, fullgraph=True)
    x = g.q.detach().requires_grad_()
    compiled(x, g.k, (g.q2k_idx, g.q2k_num), g.vbs).float().square().sum().backward()
    got = [x.grad] + [prm.grad for prm in model.parameters()]
    x.grad = None
    model.zero_grad()
    model(x, g.k, (g.q2k_idx, g.q2k_num), g.vbs).float().square().sum().backward()
    want = [x.grad] + [prm.grad for prm in model.parameters()]
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=5e-2, rtol=5e-2)
    torch._dynamo.reset()


def test_training_step_replays_as_a_cuda_graph(gen):
    """Forward, backward and an optimizer step captured once, replayed on new inputs: the
    same parameters as running the steps eagerly."""
    _, g = cuda_problem(gen, nq=2, nk=3, min_count=1)
    lists = (g.q2k_idx, g.q2k_num)
    model = Block(g.q.shape[-1]).cuda()
    eager_model = Block(g.q.shape[-1]).cuda()
    eager_model.load_state_dict(model.state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    eager_opt = torch.optim.SGD(eager_model.parameters(), lr=0.1)
    x = torch.randn_like(g.q)

    def step(m, o, inp):
        o.zero_grad(set_to_none=False)
        m(inp, g.k, lists, g.vbs).float().square().mean().backward()
        o.step()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside capture, as CUDA graphs require
        step(model, opt, x)
    torch.cuda.current_stream().wait_stream(side)
    step(eager_model, eager_opt, x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(model, opt, x)
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        graph.replay()
        step(eager_model, eager_opt, x)
    for a, b in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(a, b, atol=2e-2, rtol=2e-2)
