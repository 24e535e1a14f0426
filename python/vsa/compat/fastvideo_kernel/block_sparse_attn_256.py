"""fastvideo_kernel.block_sparse_attn_256 on vsa: the sparse branch of VSA-128 and VSA-256.

- 128-token blocks run natively: 128 is one of vsa's kernel block sizes.
- 256-token blocks run as 128-token blocks. Each logical 256-block splits in
  two halves on both axes: a query half keeps its block's list, a listed KV
  block becomes its two halves, and the halves' valid counts are the logical
  count cut at 128 (a half may hold 0 valid keys: it is masked whole). Every
  query row then attends exactly the keys it attended before, in the same
  softmax, so the result is the 256-block one — computed by vsa's tuned
  128-block kernels (larger tiles and half the list entries of a 64-block
  expansion) rather than a separate 256 kernel.

Each returns (out, M): M is the base-2 log-sum-exp [B, H, S] float32 for
both layouts. The block maps may be [B, H, NQ, NK] or [H, NQ, NK].
"""

from __future__ import annotations

from typing import Tuple

from torch import Tensor

import vsa
from vsa._args import invalid_argument
from vsa._tensors import host_counts
from vsa.compat.fastvideo_kernel.block_sparse_attn import attention_map
from vsa.metadata import halve_block_sizes

_NATIVE_BLOCK = 128


def _expect_blocks(k: Tensor, seq_axis: int, variable_block_sizes: Tensor, block: int) -> None:
    if k.dim() == 4 and k.shape[seq_axis] != variable_block_sizes.numel() * block:
        raise invalid_argument("variable_block_sizes.shape",
                               f"one entry per {block}-token block of k ({k.shape[seq_axis]} tokens)",
                               list(variable_block_sizes.shape))


def sparse_branch(q: Tensor, k: Tensor, v: Tensor, block_map: Tensor, variable_block_sizes: Tensor,
                  block: int, layout: str) -> Tuple[Tensor, Tensor]:
    """Block-sparse attention over `block`-token blocks (64, 128 or 256) in either layout."""
    _expect_blocks(k, 2 if layout == "bhsd" else 1, variable_block_sizes, block)
    block_map = attention_map(block_map, q, k, variable_block_sizes, layout)  # checked before any halving
    counts = variable_block_sizes
    if block == 2 * _NATIVE_BLOCK:
        block_map, counts = _halves(block_map, variable_block_sizes)
    try:
        return vsa.block_sparse_attn_from_mask(q, k, v, block_map, counts, layout=layout,
                                               deterministic=True)  # as block_sparse_attn.py says why
    except ValueError:
        if counts is not variable_block_sizes:  # the core named a bad count by its half, at the half's index
            host_counts(variable_block_sizes, "variable_block_sizes", block)
        raise


def _halves(block_map: Tensor, variable_block_sizes: Tensor) -> Tuple[Tensor, Tensor]:
    """A 256-block map and counts as 128-block ones (see the module docstring)."""
    halved_map = block_map.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)
    return halved_map, halve_block_sizes(variable_block_sizes, _NATIVE_BLOCK)  # int64: never narrowed


def block_sparse_attn_128(q: Tensor, k: Tensor, v: Tensor, logical_block_map_128: Tensor,
                          logical_variable_block_sizes_128: Tensor) -> Tuple[Tensor, Tensor]:
    """VSA-128 sparse branch, q/k/v [B, H, S, D]."""
    return sparse_branch(q, k, v, logical_block_map_128, logical_variable_block_sizes_128, 128, "bhsd")


def block_sparse_attn_128_bshd(q: Tensor, k: Tensor, v: Tensor, logical_block_map_128: Tensor,
                               logical_variable_block_sizes_128: Tensor) -> Tuple[Tensor, Tensor]:
    """VSA-128 sparse branch, q/k/v [B, S, H, D] (no transposes: vsa reads BSHD natively)."""
    return sparse_branch(q, k, v, logical_block_map_128, logical_variable_block_sizes_128, 128, "bshd")


def block_sparse_attn_256(q: Tensor, k: Tensor, v: Tensor, logical_block_map_256: Tensor,
                          logical_variable_block_sizes_256: Tensor) -> Tuple[Tensor, Tensor]:
    """VSA-256 sparse branch, q/k/v [B, H, S, D]."""
    return sparse_branch(q, k, v, logical_block_map_256, logical_variable_block_sizes_256, 256, "bhsd")


def block_sparse_attn_256_bshd(q: Tensor, k: Tensor, v: Tensor, logical_block_map_256: Tensor,
                               logical_variable_block_sizes_256: Tensor) -> Tuple[Tensor, Tensor]:
    """VSA-256 sparse branch, q/k/v [B, S, H, D]."""
    return sparse_branch(q, k, v, logical_block_map_256, logical_variable_block_sizes_256, 256, "bshd")
