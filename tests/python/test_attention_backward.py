"""Gradients of vsa.block_sparse_attn (CPU backend) against autograd of the float64 reference."""

import pytest
import torch

import vsa
from vsa import _C
from attention_reference import make_problem, reference_attention, rel_error


def grads_of(fn, q, k, v, dout):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v)
    out.backward(dout)
    return out, (q.grad, k.grad, v.grad)


def check_grads(p, *, scale=None, tol=1e-4):
    dout = torch.randn(p.q.shape, dtype=torch.float64)
    out, grads = grads_of(lambda q, k, v: vsa.block_sparse_attn(
        q, k, v, *p.lists, scale=scale, layout=p.layout)[0], p.q, p.k, p.v, dout.to(p.q.dtype))
    ref_out, ref_grads = grads_of(lambda q, k, v: reference_attention(
        q, k, v, *p.lists, scale=scale, layout=p.layout)[0], p.q.double(), p.k.double(),
        p.v.double(), dout)
    for name, got, want, like in zip("qkv", grads, ref_grads, (p.q, p.k, p.v)):
        assert got.shape == like.shape and got.dtype == like.dtype, name
        assert rel_error(got, want) <= tol, name


@pytest.mark.parametrize("case", [
    dict(),
    dict(layout="bshd", batch=2),
    dict(heads=4, kv_heads=2),  # dk/dv summed over the query heads of a KV head
    dict(nq=3, nk=2, vbs=[64, 9]),  # partial blocks, odd NQ
    dict(index_dtype=torch.int64, duplicates=True, max_kv=4),
    dict(block=128, nq=1, nk=2, dim=128),
], ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
def test_grads_match_reference(gen, case):
    p = make_problem(gen, **case)
    p.q2k_num[0, 0, 0] = 0  # an empty row has zero gradient and must not poison the rest
    check_grads(p)


def test_grads_with_scale(gen):
    check_grads(make_problem(gen), scale=0.2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_grads(gen, dtype):
    check_grads(make_problem(gen, dtype=dtype), tol=2e-2)


def test_gradcheck_on_random_projections(gen):
    """torch.autograd.gradcheck (central differences vs our backward) on the op itself.

    The backend has no float64 and the smallest problem has thousands of
    inputs, so gradcheck runs on a float64 function of a few parameters:
    q, k, v each move along 6 random directions (theta) and the output is read
    through 6 random projections. Inside, the op runs in float32, so the
    numerical side is good to ~1e-3 (hence tol 3e-3, eps 1e-2). It checks
    J·U for random U — a 1 % error in any of dq, dk, dv fails it (verified by
    scaling each gradient by 1.01) — independently of the float64 reference
    used by test_grads_match_reference. (gradcheck's own fast_mode was tried
    and did not catch a doubled gradient in float32.)
    """
    p = make_problem(gen, nq=1, nk=2, min_count=1, vbs=[64, 40])
    n = 6
    bases = [(0.5 * p.q).double(), p.k.double(), p.v.double()]
    directions = [torch.randn(n, *b.shape, generator=gen, dtype=torch.float64) * 10 / b.numel() ** 0.5
                  for b in bases]
    readout = torch.randn(n, *p.q.shape, generator=gen, dtype=torch.float64)

    def projected_attention(*thetas):
        q, k, v = ((b + torch.einsum("n,n...->...", t, u)).float()
                   for b, t, u in zip(bases, thetas, directions))
        out = vsa.block_sparse_attn(q, k, v, *p.lists, need_lse=False)[0]
        return (readout * out.double()).flatten(1).sum(-1)

    thetas = [torch.zeros(n, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    assert torch.autograd.gradcheck(projected_attention, thetas, eps=1e-2, atol=3e-3, rtol=3e-3)


def test_lse_is_not_differentiable(gen):
    p = make_problem(gen)
    q = p.q.requires_grad_()
    out, lse = vsa.block_sparse_attn(q, p.k, p.v, *p.lists)
    assert out.requires_grad and not lse.requires_grad


def test_need_lse_false_still_trains(gen):
    # The backward needs lse; the op keeps it internally when grads are asked. Every row
    # lists every block (block 0 is whole), so no draw leaves q's gradient zero (with
    # counts from 0, one draw in 256 listed nothing at all).
    p = make_problem(gen, min_count=3)
    q = p.q.requires_grad_()
    out, lse = vsa.block_sparse_attn(q, p.k, p.v, *p.lists, need_lse=False)
    assert lse is None
    out.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all() and q.grad.abs().sum() > 0


def test_binding_backward_writes_every_gradient_element(gen):
    p = make_problem(gen, heads=4, kv_heads=2, nq=2, nk=3, vbs=[64, 0, 30])
    out = torch.empty_like(p.q)
    lse = torch.empty(1, 4, 128)
    _C.forward(p.q, p.k, p.v, *p.lists, None, out, lse, "bhsd", 0.0, True, 0)
    dout = torch.randn(p.q.shape, generator=gen)
    dq, dk, dv = (torch.full_like(t, float("nan")) for t in (p.q, p.k, p.v))
    _C.backward(p.q, p.k, p.v, *p.lists, None, out, lse, dout, None, None, None, None, dq, dk, dv,
                "bhsd", 0.0, False, 0)
    for g in (dq, dk, dv):
        assert torch.isfinite(g).all()
    # Keys no row attends (block 1 has no valid keys) get exactly zero gradient.
    assert torch.equal(dk[:, :, 64:128], torch.zeros_like(dk[:, :, 64:128]))
