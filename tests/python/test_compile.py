"""The custom ops under torch.compile(fullgraph=True) (torch.library.opcheck of every op: test_opcheck.py)."""

import pytest
import torch

import vsa
from attention_reference import make_problem


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class SparseAttentionBlock(torch.nn.Module):
    """A toy layer: projections around both public ops."""

    def __init__(self, dim=64):
        super().__init__()
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x, kv, lists, block_map, vbs):
        q = self.proj(x)
        out, lse = vsa.block_sparse_attn(q, kv, kv, *lists, vbs)
        masked, _ = vsa.block_sparse_attn_from_mask(q, kv, kv, block_map, vbs, need_lse=False)
        return out + masked, lse


def test_compile_fullgraph_forward_and_backward(gen):
    p = make_problem(gen, heads=2, nq=2, nk=2, min_count=1)
    block_map = torch.rand(1, 2, 2, 2, generator=gen) > 0.3
    lists = (p.q2k_idx, p.q2k_num)
    model = SparseAttentionBlock()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")

    x = p.q.requires_grad_()
    out, lse = compiled(x, p.k, lists, block_map, p.vbs)
    out.square().sum().backward()
    grads = [x.grad] + [prm.grad for prm in model.parameters()]

    model.zero_grad()
    x_eager = p.q.detach().clone().requires_grad_()
    out_eager, lse_eager = model(x_eager, p.k, lists, block_map, p.vbs)
    out_eager.square().sum().backward()
    grads_eager = [x_eager.grad] + [prm.grad for prm in model.parameters()]

    torch.testing.assert_close(out, out_eager)
    torch.testing.assert_close(lse, lse_eager)
    for got, want in zip(grads, grads_eager):
        torch.testing.assert_close(got, want)
        assert got.abs().sum() > 0


def test_compile_inductor_inference(gen):
    """The default backend (inductor) around the ops, no_grad: out matches eager."""
    p = make_problem(gen, nq=2, nk=2)

    def step(q, k, v, idx, num, vbs):
        out, _ = vsa.block_sparse_attn(q * 2, k, v, idx, num, vbs, need_lse=False)
        return out.relu()

    with torch.no_grad():
        got = torch.compile(step, fullgraph=True)(p.q, p.k, p.v, *p.lists)
        want = step(p.q, p.k, p.v, *p.lists)
    torch.testing.assert_close(got, want)


def test_is_supported_compiles_without_graph_break(gen):
    """A per-layer dispatch on is_supported traces into the graph; each answer is right."""
    def dispatch(q, k, v, vbs):
        return q * 2 if vsa.is_supported(q, k, v, vbs) else q * 3

    compiled = torch.compile(dispatch, fullgraph=True, backend="eager")
    p = make_problem(gen)
    torch.testing.assert_close(compiled(p.q, p.k, p.v, p.vbs), p.q * 2)
    q, k, v = (t.double() for t in (p.q, p.k, p.v))  # float64: unsupported
    torch.testing.assert_close(compiled(q, k, v, p.vbs), q * 3)
