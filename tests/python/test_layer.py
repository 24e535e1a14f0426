"""vsa.video_sparse_attn (coarse + top-k fine + gate) against a float64 composition
of the reference attention."""

import math

import pytest
import torch

import vsa
from attention_reference import reference_attention, rel_error


def reference_block_mean(x, counts, block):
    b, h, s, d = x.shape
    mean = torch.zeros(b, h, s // block, d, dtype=torch.float64)
    for n, c in enumerate(counts.tolist()):
        if c:
            mean[:, :, n] = x[:, :, n * block:n * block + c].double().mean(dim=2)
    return mean


def reference_vsa(q, k, v, vbs, q_vbs, topk, gate):
    group = q.shape[1] // k.shape[1]
    q_c = reference_block_mean(q, q_vbs, 64)
    k_c = reference_block_mean(k, vbs, 64).repeat_interleave(group, 1)
    v_c = reference_block_mean(v, vbs, 64).repeat_interleave(group, 1)
    scores = (q_c @ k_c.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(vbs == 0, float("-inf"))
    coarse = (torch.softmax(scores, -1) @ v_c).repeat_interleave(64, dim=2)
    top = scores.topk(topk, dim=-1)
    lists = (top.indices, torch.full(top.indices.shape[:-1], topk))
    fine, _ = reference_attention(q, k, v, *lists, vbs)
    margin = (top.values[..., -1] - scores.topk(topk + 1, dim=-1).values[..., -1]).min() \
        if topk < scores.shape[-1] else math.inf
    return fine + coarse * gate.double(), margin


def draw(gen, heads, kv_heads, nq, nk):
    q = torch.randn(1, heads, nq * 64, 64, generator=gen)
    k, v = (torch.randn(1, kv_heads, nk * 64, 64, generator=gen) for _ in range(2))
    vbs = torch.randint(1, 65, (nk,), generator=gen)
    vbs[0], vbs[-1] = 64, 0  # a full block and an empty one
    q_vbs = torch.randint(1, 65, (nq,), generator=gen)
    gate = torch.rand(q.shape, generator=gen)
    return q, k, v, vbs, q_vbs, gate


@pytest.mark.parametrize("heads,kv_heads,topk", [(2, 2, 2), (4, 2, 3), (2, 1, 5)])
def test_matches_reference(gen, heads, kv_heads, topk):
    for _ in range(5):  # top-k near a tie is ambiguous in float32: draw until it is clear
        q, k, v, vbs, q_vbs, gate = draw(gen, heads, kv_heads, nq=3, nk=5)
        want, margin = reference_vsa(q, k, v, vbs, q_vbs, topk, gate)
        if margin > 1e-3:
            break
    got = vsa.video_sparse_attn(q, k, v, vbs, q_vbs, topk, gate=gate)
    assert got.shape == q.shape
    assert rel_error(got, want) <= 1e-5


def test_bshd_and_no_gate(gen):
    q, k, v, vbs, q_vbs, _ = draw(gen, 2, 2, nq=2, nk=3)
    bhsd = vsa.video_sparse_attn(q, k, v, vbs, q_vbs, 3, block_size=(4, 4, 4))
    t = lambda x: x.transpose(1, 2)
    bshd = vsa.video_sparse_attn(t(q), t(k), t(v), vbs, q_vbs, 3, layout="bshd")
    torch.testing.assert_close(t(bshd), bhsd)


def test_differentiable_end_to_end(gen):
    q, k, v, vbs, q_vbs, gate = draw(gen, 2, 2, nq=2, nk=3)
    leaves = [t.requires_grad_() for t in (q, k, v, gate)]
    vsa.video_sparse_attn(q, k, v, vbs, q_vbs, 3, gate=gate).square().sum().backward()
    ref_leaves = [t.detach().double().requires_grad_() for t in (q, k, v, gate)]
    want, _ = reference_vsa(*ref_leaves[:3], vbs, q_vbs, 3, ref_leaves[3])
    want.square().sum().backward()
    for got, ref in zip(leaves, ref_leaves):
        assert rel_error(got.grad, ref.grad) <= 1e-4


def test_bad_topk(gen):
    q, k, v, vbs, q_vbs, _ = draw(gen, 2, 2, nq=2, nk=3)
    with pytest.raises(ValueError, match="'topk'"):
        vsa.video_sparse_attn(q, k, v, vbs, q_vbs, 4)
