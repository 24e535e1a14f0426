"""An independent float64 reference for the tests, and random problems to feed it.

The reference expands the block lists to a dense token mask (with the
multiplicity of duplicate entries) and runs plain softmax attention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

EMPTY_ROW_LSE = -1.0e30  # the contract's sentinel (checked against vsa.EMPTY_ROW_LSE)


@dataclass
class Problem:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    q2k_idx: torch.Tensor
    q2k_num: torch.Tensor
    vbs: torch.Tensor
    layout: str = "bhsd"

    @property
    def lists(self):
        return self.q2k_idx, self.q2k_num, self.vbs

    def with_(self, **changes) -> "Problem":
        return replace(self, **changes)


def random_lists(gen, batch, heads, nq, nk, max_kv, *, duplicates=False, min_count=0):
    """Unsorted block lists with random counts in [min_count, max_kv], padded with -1."""
    idx = torch.full((batch, heads, nq, max_kv), -1, dtype=torch.int64)
    num = torch.randint(min_count, max_kv + 1, (batch, heads, nq), generator=gen)
    for b in range(batch):
        for h in range(heads):
            for i in range(nq):
                n = int(num[b, h, i])
                if duplicates:
                    picks = torch.randint(0, nk, (n,), generator=gen)
                else:
                    picks = torch.randperm(nk, generator=gen)[:n]
                idx[b, h, i, :n] = picks
    return idx, num


def make_problem(gen, *, batch=1, heads=2, kv_heads=None, nq=2, nk=3, block=64, dim=64,
                 max_kv=None, dtype=torch.float32, layout="bhsd", index_dtype=torch.int32,
                 vbs=None, duplicates=False, min_count=0) -> Problem:
    kv_heads = kv_heads or heads
    max_kv = max_kv or nk
    if duplicates:
        max_kv = max(max_kv, 2)

    def seq(h, s):
        shape = (batch, h, s, dim) if layout == "bhsd" else (batch, s, h, dim)
        return torch.randn(shape, generator=gen).to(dtype)

    if max_kv > nk and not duplicates:
        raise ValueError("max_kv > nk needs duplicates")
    idx, num = random_lists(gen, batch, heads, nq, nk, max_kv, duplicates=duplicates,
                            min_count=min_count)
    if vbs is None:
        vbs = torch.randint(0, block + 1, (nk,), generator=gen)
        vbs[0] = block  # one full block in every problem
    return Problem(seq(heads, nq * block), seq(kv_heads, nk * block), seq(kv_heads, nk * block),
                   idx.to(index_dtype), num.to(index_dtype), torch.as_tensor(vbs).to(index_dtype),
                   layout)


def block_weights(q2k_idx, q2k_num, nk):
    """[B, H, NQ, NK] float64: how many times each row lists each block (first q2k_num entries)."""
    idx = q2k_idx.long()
    listed = torch.arange(idx.shape[-1]) < q2k_num.long()[..., None]
    weights = torch.zeros(*idx.shape[:-1], nk + 1, dtype=torch.float64)
    slot = torch.where(listed, idx, nk)  # unlisted entries go to a discarded extra column
    weights.scatter_add_(-1, slot, torch.ones_like(slot, dtype=torch.float64))
    return weights[..., :nk]


def reference_attention(q, k, v, q2k_idx, q2k_num, vbs, *, scale=None, layout="bhsd", q_vbs=None):
    """(out, lse base 2) in float64, differentiable in q, k, v. Query rows past q_vbs
    (when given) attend to nothing: empty rows."""
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    q, k, v = q.double(), k.double(), v.double()
    heads, kv_heads, seq_q, dim = q.shape[1], k.shape[1], q.shape[2], q.shape[3]
    nk = vbs.numel()
    block = k.shape[2] // nk
    k = k.repeat_interleave(heads // kv_heads, dim=1)
    v = v.repeat_interleave(heads // kv_heads, dim=1)
    scale = 1.0 / math.sqrt(dim) if scale is None else scale

    weights = block_weights(q2k_idx.cpu(), q2k_num.cpu(), nk).to(q.device)
    key_valid = (torch.arange(block, device=q.device) < vbs.to(q.device).long()[:, None]).reshape(-1)
    token_w = weights.repeat_interleave(block, dim=2).repeat_interleave(block, dim=3) * key_valid
    if q_vbs is not None:
        query_valid = (torch.arange(block, device=q.device) < q_vbs.to(q.device).long()[:, None]).reshape(-1)
        token_w = token_w * query_valid[:, None]
    scores = (q @ k.transpose(-2, -1)) * scale
    scores = scores.masked_fill(token_w == 0, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    unnorm = token_w * torch.exp(scores - row_max)
    denom = unnorm.sum(dim=-1, keepdim=True)
    empty = denom == 0
    probs = unnorm / torch.where(empty, torch.ones_like(denom), denom)
    out = probs @ v
    lse = torch.where(empty, torch.full_like(denom, EMPTY_ROW_LSE),
                      (row_max + torch.log(torch.where(empty, torch.ones_like(denom), denom)))
                      / math.log(2.0)).squeeze(-1)
    if layout == "bshd":
        out = out.transpose(1, 2)
    assert out.shape[-2] == (seq_q if layout == "bhsd" else heads)
    return out, lse


def rel_error(actual, expected) -> float:
    """Relative Frobenius error (the tests' measure against the float64 reference)."""
    expected = expected.double()
    return float((actual.double() - expected).norm() / expected.norm().clamp_min(1e-30))


TOLERANCE = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}
