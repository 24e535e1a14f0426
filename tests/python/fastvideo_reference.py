"""References for the fastvideo_kernel layer's tests, written from FastVideo's documented
semantics: dense float64 attention under a token mask, and the VSA layer with FastVideo's
arithmetic (block means over every token of a block divided by its valid count, rounded
to the input dtype; coarse scores in that dtype; top-k over every block)."""

from __future__ import annotations

import math

import torch


def token_mask(block_map, vbs, q_block, kv_block):
    """[B, H, NQ, NK] bool blocks -> [B, H, NQ*q_block, NK*kv_block], keys past vbs masked."""
    mask = block_map.bool().repeat_interleave(q_block, dim=2).repeat_interleave(kv_block, dim=3)
    key_valid = torch.arange(kv_block, device=vbs.device) < vbs.long()[:, None]
    return mask & key_valid.reshape(-1).to(mask.device)


def masked_attention(q, k, v, mask):
    """float64 softmax attention of [B, H, S, D] tensors under a token mask; (out, lse base 2).
    Every row must see at least one key."""
    q, k, v = q.double(), k.double(), v.double()
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~mask, -math.inf)
    lse = torch.logsumexp(scores, dim=-1)
    return torch.softmax(scores, dim=-1) @ v, lse / math.log(2.0)


def fastvideo_means(x, counts, block):
    """[B, H, N*block, D] -> [B, H, N, D] in x's dtype: float32 block sums (pads included) / counts."""
    b, h, s, d = x.shape
    return (x.float().reshape(b, h, s // block, block, d).sum(dim=3) / counts.view(1, 1, -1, 1)).to(x.dtype)


def fastvideo_layer(q, k, v, vbs, q_vbs, topk, block, gate=None):
    """VSA as FastVideo computes it, [B, H, S, D]; the fine stage in float64. Returns float64,
    differentiable in q, k, v and gate."""
    q_c, k_c, v_c = fastvideo_means(q, q_vbs, block), fastvideo_means(k, vbs, block), fastvideo_means(v, vbs, block)
    scores = (q_c @ k_c.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    coarse = (torch.softmax(scores, dim=-1) @ v_c).repeat_interleave(block, dim=2)
    chosen = torch.topk(scores.detach(), min(topk, scores.shape[-1]), dim=-1).indices
    block_map = torch.zeros(scores.shape, dtype=torch.bool, device=q.device).scatter_(-1, chosen, True)
    fine, _ = masked_attention(q, k, v, token_mask(block_map, vbs, block, block))
    return fine + (coarse.double() if gate is None else (coarse * gate).double())


def zero_pads(x, counts, block):
    """x [B, H, N*block, D] with every token past its block's count set to zero."""
    valid = (torch.arange(block, device=x.device) < counts.long()[:, None]).reshape(1, 1, -1, 1)
    return x * valid.to(x.dtype)
