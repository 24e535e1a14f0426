"""A float64 reference for VSA self-attention over the raster tokens of a (T, H, W) grid,
written at the token level: each token's block is computed from its coordinates, so
nothing here shares vsa's tiling (tile order, padding, tile / untile)."""

from __future__ import annotations

import math

import torch

from layer_reference import reference_lists


def token_blocks(grid, tile_size):
    """[T*H*W] int64: the block (tile) of each raster token, and the number of blocks."""
    counts = [-(-n // t) for n, t in zip(grid, tile_size)]
    axes = torch.meshgrid(*(torch.arange(n) for n in grid), indexing="ij")
    t, h, w = (axis.reshape(-1) // size for axis, size in zip(axes, tile_size))
    return (t * counts[1] + h) * counts[2] + w, math.prod(counts)


def reference_grid_attention(q, k, v, grid, *, mode, topk=None, tile_size=(4, 4, 4), gate=None):
    """(out [B, S, heads, D] float64, margin) for q, k, v [B, S, heads, D] of `grid`.

    margin is the smallest gap between the last kept and the first dropped block score
    (inf in mode "dense"): near-ties may select differently in float32.
    """
    blocks, num_blocks = token_blocks(grid, tile_size)
    member = torch.nn.functional.one_hot(blocks, num_blocks).double().T  # [N, S]
    qd, kd, vd = (x.double().transpose(1, 2) for x in (q, k, v))       # [B, heads, S, D]
    mean = lambda x: (member @ x) / member.sum(dim=1, keepdim=True)      # noqa: E731
    q_c, k_c, v_c = mean(qd), mean(kd), mean(vd)
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = q_c @ k_c.transpose(-2, -1)                                 # [B, heads, N, N]
    margin = math.inf
    if mode == "dense":
        allowed = torch.ones_like(scores, dtype=torch.bool)
    else:
        live = torch.ones(num_blocks, dtype=torch.bool)
        idx, num, margin = reference_lists(scores, live, topk)
        allowed = torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, idx.clamp(min=0), True)
    mask = allowed[:, :, blocks][:, :, :, blocks]                        # [B, heads, S, S]
    logits = (qd @ kd.transpose(-2, -1) * scale).masked_fill(~mask, -math.inf)
    out = torch.softmax(logits, dim=-1) @ vd
    if mode == "vsa":
        coarse = (torch.softmax(scores * scale, dim=-1) @ v_c)[:, :, blocks]
        out = out + coarse * (1.0 if gate is None else gate.double().transpose(1, 2))
    return out.transpose(1, 2), margin
