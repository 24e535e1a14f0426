"""The VSA layer in plain torch: the coarse stage a user would write without vsa or FastVideo, and,
run in float64, the reference the layer peers are checked against on sampled query blocks.

out = fine + coarse (no gate), where
- coarse: the mean of each block over its valid tokens (pad tokens masked, never assumed zero);
  dense softmax attention over the block means at scale 1/sqrt(D), KV blocks without valid tokens
  getting no weight; each query block's result broadcast over its tokens;
- fine: each query block attends, token by token, to its top-k KV blocks by coarse score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .reference import Sample, reference_blocks


def block_means(x: torch.Tensor, counts: torch.Tensor, block_size: int) -> torch.Tensor:
    """[B, H, N*blk, D] -> [B, H, N, D] in x's dtype, summed in float32 (float64 for float64)."""
    b, h, s, d = x.shape
    valid = torch.arange(block_size, device=x.device) < counts.to(x.device)[:, None]
    blocks = x.reshape(b, h, s // block_size, block_size, d) * valid[..., None].to(x.dtype)
    total = blocks.sum(dim=3, dtype=torch.float64 if x.dtype == torch.float64 else torch.float32)
    return (total / counts.to(x.device).clamp(min=1)[:, None]).to(x.dtype)


def coarse_stage(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 variable_block_sizes: torch.Tensor, block_size: int,
                 topk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(coarse output per query block [B, H, NQ, D], the top-k KV blocks of each query block
    [B, H, NQ, topk] in descending score) for BHSD q/k/v of one sequence. Empty KV blocks score
    -inf: they come last, and are listed only when top-k exceeds the non-empty blocks."""
    q_c, k_c, v_c = (block_means(t, variable_block_sizes, block_size) for t in (q, k, v))
    scores = (q_c @ k_c.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    scores = scores.masked_fill(variable_block_sizes.to(q.device) == 0, float("-inf"))
    coarse = torch.softmax(scores, dim=-1) @ v_c
    return coarse, scores.topk(topk, dim=-1).indices


@dataclass
class ReferenceLayer:
    """The float64 layer's coarse output and its selection as block lists (int32)."""

    coarse: torch.Tensor  # [B, H, NQ, D] float64
    q2k_idx: torch.Tensor  # [B, H, NQ, topk]
    q2k_num: torch.Tensor  # [B, H, NQ]: min(topk, non-empty KV blocks)


def reference_layer(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    variable_block_sizes: torch.Tensor, block_size: int,
                    topk: int) -> ReferenceLayer:
    coarse, top = coarse_stage(q.double(), k.double(), v.double(), variable_block_sizes,
                               block_size, topk)
    listed = min(topk, int((variable_block_sizes > 0).sum()))
    num = torch.full(top.shape[:-1], listed, dtype=torch.int32, device=top.device)
    return ReferenceLayer(coarse, top.to(torch.int32), num)


def reference_layer_blocks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           variable_block_sizes: torch.Tensor, ref: ReferenceLayer,
                           samples: list[Sample]) -> torch.Tensor:
    """The whole layer's output on sampled query blocks, [len(samples), blk, D] float64."""
    fine = reference_blocks(q, k, v, ref.q2k_idx, ref.q2k_num, variable_block_sizes, samples)
    coarse = torch.stack([ref.coarse[b, h, i] for b, h, i in samples])
    return fine + coarse[:, None, :]
