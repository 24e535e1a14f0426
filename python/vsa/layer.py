"""The VSA layer: coarse stage + fine stage + gate, differentiable end to end.

    out = coarse · gate + fine

- coarse: every 64-token block is compressed to its mean over its valid
  tokens; dense attention over the block means; each query block's result is
  broadcast over its tokens.
- fine: each query block attends, token by token, to the top-k KV blocks by
  coarse score (block_sparse_attn).
"""

from __future__ import annotations

import math
from typing import Optional, Union

import torch
from torch import Tensor

from vsa._args import invalid_argument, scale_argument
from vsa.attention import block_sparse_attn
from vsa.metadata import topk_to_index


def _block_mean(x: Tensor, valid_counts: Tensor, block: int) -> Tensor:
    """[B, H, N*block, D] -> [B, H, N, D]: mean over each block's first valid_counts tokens.

    Pad tokens are masked out (not assumed zero); an empty block's mean is 0.
    """
    b, h, s, d = x.shape
    blocks = x.reshape(b, h, s // block, block, d)
    counts = valid_counts.to(device=x.device)
    valid = torch.arange(block, device=x.device) < counts[:, None]  # [N, block]
    total = (blocks.float() * valid[None, None, :, :, None]).sum(dim=3)
    return (total / counts.clamp(min=1)[None, None, :, None]).to(x.dtype)


def video_sparse_attn(q: Tensor, k: Tensor, v: Tensor, variable_block_sizes: Tensor,
                      q_variable_block_sizes: Tensor, topk: int,
                      block_size: Union[int, tuple[int, int, int]] = 64,
                      gate: Optional[Tensor] = None, *, scale: Optional[float] = None,
                      layout: str = "bhsd") -> Tensor:
    """VSA attention on tiled, padded sequences (see vsa.tile).

    q [B, H, Sq, D], k/v [B, Hkv, Skv, D] ("bhsd"; or [B, S, H, D] with
    layout="bshd"); variable_block_sizes [NK] and q_variable_block_sizes [NQ]
    count the valid tokens of each block; block_size is the tokens per block
    (an int, or a tile shape whose volume it is). gate (q's shape) weights the
    coarse output. KV blocks without valid tokens get no coarse weight and add
    nothing to the fine stage (FastVideo assumes every block has valid tokens).
    """
    block = math.prod(block_size) if isinstance(block_size, (tuple, list)) else int(block_size)
    if layout not in ("bhsd", "bshd"):
        raise invalid_argument("layout", "'bhsd' or 'bshd'", repr(layout))
    to_bhsd = (lambda t: t) if layout == "bhsd" else (lambda t: t.transpose(1, 2))
    qh, kh, vh = to_bhsd(q), to_bhsd(k), to_bhsd(v)
    num_kv_blocks = kh.shape[2] // block
    if not 1 <= topk <= num_kv_blocks:
        raise invalid_argument("topk", f"a block count in [1, NK = {num_kv_blocks}]", topk)
    group = qh.shape[1] // kh.shape[1]  # GQA: each KV head serves `group` query heads

    q_c = _block_mean(qh, q_variable_block_sizes, block)
    k_c = _block_mean(kh, variable_block_sizes, block).repeat_interleave(group, dim=1)
    v_c = _block_mean(vh, variable_block_sizes, block).repeat_interleave(group, dim=1)
    softmax_scale = scale_argument(scale) or 1.0 / math.sqrt(qh.shape[-1])
    scores = (q_c @ k_c.transpose(-2, -1)).float() * softmax_scale
    empty_kv = variable_block_sizes.to(device=q.device) == 0
    scores = scores.masked_fill(empty_kv, float("-inf"))
    coarse = (torch.softmax(scores, dim=-1).to(v_c.dtype) @ v_c).repeat_interleave(block, dim=2)

    q2k_idx, q2k_num = topk_to_index(scores.topk(topk, dim=-1).indices)
    fine, _ = block_sparse_attn(q, k, v, q2k_idx, q2k_num, variable_block_sizes, scale=scale,
                                need_lse=False, layout=layout)
    coarse = to_bhsd(coarse)  # back to the caller's layout (the transpose is its own inverse)
    return fine + (coarse if gate is None else coarse * gate)
