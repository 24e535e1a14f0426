"""fastvideo_kernel.ops on vsa: the VSA layer with FastVideo's arithmetic.

video_sparse_attn / video_sparse_attn_bshd compute what FastVideo's do:

- block means: the sum of every token of the block (padding included, which
  FastVideo expects to be zero) over the block's valid count, accumulated in
  float32 and rounded to the input dtype; their gradient reaches every token
  of the block, padding too;
- coarse scores, softmax and coarse output in the input dtype (torch matmul),
  scores scaled by 1/sqrt(D);
- per query block, the top-k KV blocks of those scores (torch.topk; topk is
  capped at NK), every block a candidate;
- the fine stage on vsa's kernels (64- and 128-token blocks natively,
  256 as 128-token halves: see block_sparse_attn_256);
- out = coarse * compress_attn_weight + fine (coarse + fine without a gate); the gate is
  q's shape or broadcasts to it, in either layout.

Following FastVideo's rounding (not vsa.video_sparse_attn's float32 coarse
stage) is what makes the same inputs select the same blocks as FastVideo
does: near-ties in the rounded scores would otherwise go either way. A KV
block with no valid token divides by zero here as in FastVideo (NaN scores);
vsa.video_sparse_attn is the API that handles empty blocks.

block_size: an int n is an n x n x n tile (FastVideo's reading; its default 64
is therefore a 262144-token tile, refused here), or a (t, h, w) tile; the
tile's volume (64, 128 or 256) is the block size.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from vsa._args import count_value, invalid_argument
from vsa._tensors import host_counts
from vsa.compat.fastvideo_kernel._unsupported import unsupported_function
from vsa.compat.fastvideo_kernel.block_sparse_attn_256 import sparse_branch

_BLOCK_VOLUMES = (64, 128, 256)

sliding_tile_attention = unsupported_function("ops", "sliding_tile_attention")


def block_elements(block_size: Union[int, Tuple[int, int, int]]) -> int:
    tile = (block_size,) * 3 if isinstance(block_size, int) else tuple(block_size)
    volume = math.prod(tile)
    if len(tile) != 3 or volume not in _BLOCK_VOLUMES:
        raise invalid_argument("block_size", "a (t, h, w) tile, or an int n for an n x n x n tile, of "
                               f"{', '.join(map(str, _BLOCK_VOLUMES))} tokens", block_size)
    return volume


def _check_shapes(q: Tensor, k: Tensor, v: Tensor, variable_block_sizes: Tensor,
                  q_variable_block_sizes: Tensor, topk: int, block: int, layout: str) -> None:
    seq, head = (2, 1) if layout == "bhsd" else (1, 2)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise invalid_argument(f"{name}.shape", f"rank 4 ({layout})", list(t.shape))
    for name, t in (("k", k), ("v", v)):
        if t.shape[0] != q.shape[0] or t.shape[head] != q.shape[head]:
            raise invalid_argument(f"{name}.shape", f"q's batch and heads ({list(q.shape)}; no GQA "
                                   "in FastVideo's coarse stage)", list(t.shape))
    if v.shape[seq] != k.shape[seq]:
        raise invalid_argument("v.shape", f"k's sequence length {k.shape[seq]}", list(v.shape))
    for name, t, counts, counts_name in (("q", q, q_variable_block_sizes, "q_variable_block_sizes"),
                                         ("k", k, variable_block_sizes, "variable_block_sizes")):
        if t.shape[seq] % block != 0:
            raise invalid_argument(f"{name}.shape", f"a sequence of whole {block}-token blocks",
                                   list(t.shape))
        if counts.shape != (t.shape[seq] // block,):  # [[64, 64]] was read flat: means of two blocks
            raise invalid_argument(f"{counts_name}.shape", f"[{t.shape[seq] // block}], one entry per "
                                   f"{block}-token block of {name}", list(counts.shape))
    count = count_value(topk)  # 2.5 ran as min(2.5, NK), and True, 1.0 failed inside torch.topk
    if count is None or count < 1:
        raise invalid_argument("topk", "a block count of at least 1", repr(topk))


def _block_means(x: Tensor, counts: Tensor, block: int, layout: str) -> Tensor:
    """[B, H, N, D] means in x's dtype (see the module docstring)."""
    if layout == "bhsd":
        b, h, s, d = x.shape
        sums = x.reshape(b, h, s // block, block, d).float().sum(dim=3)
        return (sums / counts.view(1, 1, -1, 1)).to(x.dtype)
    b, s, h, d = x.shape
    sums = x.reshape(b, s // block, block, h, d).float().sum(dim=2)
    return (sums / counts.view(1, -1, 1, 1)).to(x.dtype).permute(0, 2, 1, 3).contiguous()


def selection(q: Tensor, k: Tensor, variable_block_sizes: Tensor, q_variable_block_sizes: Tensor, topk: int,
              block: int, layout: str) -> Tuple[Tensor, Tensor]:
    """FastVideo's coarse scores [B, H, NQ, NK] (bf16 means and products, in the inputs' dtype)
    and the top-k block ids of each row, as torch.topk orders them."""
    q_c = _block_means(q, q_variable_block_sizes, block, layout)
    k_c = _block_means(k, variable_block_sizes, block, layout)
    scores = torch.matmul(q_c, k_c.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return scores, torch.topk(scores.detach(), min(topk, scores.shape[-1]), dim=-1).indices


def _vsa(q: Tensor, k: Tensor, v: Tensor, variable_block_sizes: Tensor, q_variable_block_sizes: Tensor,
         topk: int, block_size, gate: Optional[Tensor], layout: str) -> Tensor:
    block = block_elements(block_size)
    _check_shapes(q, k, v, variable_block_sizes, q_variable_block_sizes, topk, block, layout)
    # FastVideo's fine stage attends every query row, so q_variable_block_sizes only divide the query
    # means and never reach the core, which checks counts on the CPU backend (on CUDA they are a
    # precondition, as variable_block_sizes' are): checked here where the core would check them.
    if q_variable_block_sizes.device.type == "cpu":
        host_counts(q_variable_block_sizes, "q_variable_block_sizes", block)
    if gate is not None:
        try:  # a view: FastVideo's coarse * gate broadcasts the gate against q's shape
            gate = gate.expand(q.shape)
        except RuntimeError:
            raise invalid_argument("compress_attn_weight.shape", f"q's shape {list(q.shape)} or one "
                                   "broadcasting to it", list(gate.shape)) from None
    scores, chosen = selection(q, k, variable_block_sizes, q_variable_block_sizes, topk, block, layout)
    v_c = _block_means(v, variable_block_sizes, block, layout)
    coarse = torch.matmul(torch.softmax(scores, dim=-1), v_c)  # [B, H, NQ, D]

    block_map = torch.zeros(scores.shape, dtype=torch.bool, device=scores.device).scatter_(-1, chosen, True)
    fine, _ = sparse_branch(q, k, v, block_map, variable_block_sizes, block, layout)

    b, h, nq, d = coarse.shape
    if layout == "bhsd":
        coarse = coarse.unsqueeze(3).expand(b, h, nq, block, d).reshape(q.shape)
        return fine + (coarse if gate is None else coarse * gate)
    coarse = coarse.permute(0, 2, 1, 3).unsqueeze(2)  # [B, NQ, 1, H, D], broadcast over the block
    fine = fine.view(b, nq, block, h, d)
    gated = coarse if gate is None else coarse * gate.unflatten(1, (nq, block))
    return (fine + gated).view(q.shape)


def video_sparse_attn(q: Tensor, k: Tensor, v: Tensor, variable_block_sizes: Tensor,
                      q_variable_block_sizes: Tensor, topk: int, block_size: Union[int, tuple] = 64,
                      compress_attn_weight: Optional[Tensor] = None) -> Tensor:
    """VSA on [B, H, S, D] tensors (tiled, padded sequences); returns q's shape."""
    return _vsa(q, k, v, variable_block_sizes, q_variable_block_sizes, topk, block_size,
                compress_attn_weight, "bhsd")


def video_sparse_attn_bshd(q: Tensor, k: Tensor, v: Tensor, variable_block_sizes: Tensor,
                           q_variable_block_sizes: Tensor, topk: int, block_size: Union[int, tuple] = 64,
                           compress_attn_weight: Optional[Tensor] = None) -> Tensor:
    """VSA on [B, S, H, D] tensors, read in place (FastVideo takes 128/256 blocks here; vsa also 64)."""
    return _vsa(q, k, v, variable_block_sizes, q_variable_block_sizes, topk, block_size,
                compress_attn_weight, "bshd")
