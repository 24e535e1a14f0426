"""VSA self-attention over the raster tokens of a (T, H, W) video latent, for model code
that keeps its tokens in raster order ([B, S, heads, D], S = T·H·W, as diffusers does).

The tokens are tiled into VSA blocks (vsa.tile: each tile_size tile of the grid is one
block, zero-padded to the tile volume), attended in the tiled order, and untiled. Three
modes:

- "vsa": the VSA layer, vsa.video_sparse_attn: coarse attention over block means, each
  query block's top-k KV blocks attended token by token, output fine + coarse (· gate).
- "fine": the fine stage alone on the coarse stage's top-k lists, with no coarse
  output added: sparse attention for a model that was not trained with VSA.
- "dense": the fine stage with every block listed: dense attention through vsa's
  kernel, the equivalence check against a model's own attention.
"""

from __future__ import annotations

import math
import numbers
from typing import Optional, Sequence, Union

import torch
from torch import Tensor

from vsa._args import count_value, invalid_argument
from vsa.layer import block_means, check_keys, coarse_stage, fine_stage, video_sparse_attn
from vsa.metadata import VSAMetadata, build_vsa_metadata, tile, untile

MODES = ("vsa", "fine", "dense")


def resolve_topk(num_blocks: int, topk: Optional[int], sparsity: Optional[float]) -> int:
    """KV blocks each query block keeps: `topk` itself, or ceil((1 - sparsity) · NK) (at
    least 1), or every block when both are None. Capped at NK."""
    if topk is not None and sparsity is not None:
        raise invalid_argument("topk / sparsity", "at most one of them",
                               f"topk={topk}, sparsity={sparsity}")
    if sparsity is not None:
        return max(1, math.ceil((1.0 - sparsity) * num_blocks))
    return num_blocks if topk is None else min(count_value(topk), num_blocks)


def check_settings(mode: str, topk: Optional[int], sparsity: Optional[float],
                   tile_size: Sequence[int]) -> None:
    """The settings' own errors, raised where a user states them, not at the first forward."""
    if mode not in MODES:
        raise invalid_argument("mode", " or ".join(repr(m) for m in MODES), repr(mode))
    count = None if topk is None else count_value(topk)  # any integer type, as the layer takes
    if topk is not None and (count is None or count < 1):
        raise invalid_argument("topk", "a positive int (KV blocks per query block) or None",
                               repr(topk))
    # A number first: a string raised TypeError from the range check.
    if sparsity is not None and (isinstance(sparsity, bool) or not isinstance(sparsity, numbers.Real)
                                 or not 0.0 <= sparsity < 1.0):
        raise invalid_argument("sparsity", "a fraction of blocks skipped in [0, 1)", repr(sparsity))
    if mode == "dense" and (topk is not None or sparsity is not None):
        raise invalid_argument("topk / sparsity",
                               "neither in mode 'dense' (every block is attended)",
                               f"topk={topk}, sparsity={sparsity}")
    if len(tuple(tile_size)) != 3 or math.prod(tile_size) not in (64, 128):
        raise invalid_argument("tile_size", "three extents (t, h, w) whose product is 64 or 128",
                               tuple(tile_size))


def _every_block(batch: int, heads: int, num_blocks: int,
                 device: torch.device) -> tuple[Tensor, Tensor]:
    """Lists naming every KV block for every query block: (q2k_idx, q2k_num), int32.
    Broadcast views; the op makes its contiguous copy on every call (B·H·NB² int32:
    18.7 MB per batch entry at Wan 480p, 12 heads, 624 blocks)."""
    idx = torch.arange(num_blocks, dtype=torch.int32, device=device)
    num = torch.full((1, 1, 1), num_blocks, dtype=torch.int32, device=device)
    return (idx.expand(batch, heads, num_blocks, num_blocks),
            num.expand(batch, heads, num_blocks))


@torch.compiler.disable
def _metadata_on(meta: VSAMetadata, device: torch.device) -> VSAMetadata:
    """meta's tiling with its tensors on `device` (build_vsa_metadata keeps one per device)."""
    return build_vsa_metadata(meta.latent_shape, meta.tile_size, device=device)


def grid_metadata(grid: Union[Sequence[int], VSAMetadata], tile_size: Sequence[int],
                  device: torch.device) -> VSAMetadata:
    """The tiling of `grid` (T, H, W) on `device` (the tokens'), or `grid` itself when it is
    already one (with tile_size's tiles) there.

    Metadata built on another device is taken as its grid: the same tiling on `device`. A
    model hook sees the latent where it enters the model, which need not be where a block
    runs (diffusers' device_map: accelerate moves each block's inputs to its device after the
    model's own pre-hooks ran; a model split over GPUs)."""
    if not isinstance(grid, VSAMetadata):
        return build_vsa_metadata(tuple(grid), tuple(tile_size), device=device)
    if grid.tile_size != tuple(tile_size):
        raise invalid_argument("tile_size", f"the tile of the metadata passed as grid, "
                               f"{grid.tile_size}", tuple(tile_size))
    if grid.variable_block_sizes.device != device:  # a constant under torch.compile: no break where equal
        return _metadata_on(grid, device)
    return grid


def grid_attention(q: Tensor, k: Tensor, v: Tensor, grid: Union[Sequence[int], VSAMetadata], *,
                   mode: str = "vsa",
                   topk: Optional[int] = None, sparsity: Optional[float] = None,
                   tile_size: Sequence[int] = (4, 4, 4), gate: Optional[Tensor] = None,
                   scale: Optional[float] = None) -> Tensor:
    """Self-attention of raster tokens q, k, v [B, S, heads, D] (S = T·H·W of `grid`),
    returned as [B, S, heads, D] in q's dtype; see the module docstring for `mode`.

    grid is (T, H, W), or its vsa.build_vsa_metadata(grid, tile_size, device): pass that
    from outside a torch.compile region, since building it is host work dynamo does not
    trace (a grid tuple inside a compiled region costs a graph break per call).

    topk (KV blocks per query block) or sparsity (the fraction skipped) sets the
    sparsity of "vsa" and "fine" (neither: every block). gate ([B, S, heads, D], "vsa"
    only) weights the coarse output. scale defaults to 1/sqrt(D).
    """
    check_settings(mode, topk, sparsity, tile_size)
    if q.dim() != 4:
        raise invalid_argument("q.shape", "[B, S, heads, D]", list(q.shape))
    if gate is not None and mode != "vsa":
        raise invalid_argument("gate", f"None in mode {mode!r} (only 'vsa' has a coarse output)",
                               "a tensor")
    meta = grid_metadata(grid, tile_size, q.device)
    for name, x in (("q", q), ("k", k), ("v", v), ("gate", gate)):
        if x is not None and (x.dim() != 4 or x.shape[1] != math.prod(meta.latent_shape)):
            raise invalid_argument(f"{name}.shape[1]", f"T·H·W = {math.prod(meta.latent_shape)} tokens "
                                   f"of the grid {meta.latent_shape}", list(x.shape))
    check_keys(q, k, v, "bshd")  # on the caller's tokens, not the tiled ones the layer sees
    if gate is not None and gate.shape != q.shape:  # likewise: the layer would name the tiled gate
        raise invalid_argument("gate.shape", f"{list(q.shape)} (as q)", list(gate.shape))
    qt, kt, vt = (tile(x, meta, dim=1) for x in (q, k, v))
    vbs = meta.variable_block_sizes
    if mode == "dense":
        q2k_idx, q2k_num = _every_block(q.shape[0], q.shape[2], meta.num_tiles, qt.device)
        out = fine_stage(qt, kt, vt, q2k_idx, q2k_num, vbs, scale=scale, layout="bshd",
                         q_variable_block_sizes=vbs)
    else:
        kept = resolve_topk(meta.num_tiles, topk, sparsity)
        if mode == "vsa":
            out = video_sparse_attn(qt, kt, vt, vbs, vbs, kept, meta.block_size,
                                    None if gate is None else tile(gate, meta, dim=1),
                                    scale=scale, layout="bshd")
        else:
            means = block_means(qt, kt, vt, vbs, vbs, layout="bshd")
            _, q2k_idx, q2k_num = coarse_stage(*means, vbs, kept, scale=scale)
            out = fine_stage(qt, kt, vt, q2k_idx, q2k_num, vbs, scale=scale, layout="bshd",
                             q_variable_block_sizes=vbs)
    return untile(out, meta, dim=1)
