"""fastvideo_kernel.block_sparse_attn on vsa: block-sparse attention with autograd.

Both entry points return (out, M) with M the base-2 log-sum-exp [B, H, S],
float32, as FastVideo's Triton path writes it (vsa's lse is that quantity).
The block size is inferred from the shapes (Skv / NK): 64 here, 128 also
works. FastVideo's backend switches (FASTVIDEO_VSA_TRITON, FASTVIDEO_VSA_TK)
have no effect: vsa picks its own kernel for the device. Unlike FastVideo,
CPU tensors work too (vsa's CPU backend).

Gradients are bitwise repeatable: the layer asks vsa for its deterministic
dq (a dQ pass summing each row in list order). On the H200's Hopper kernels
that costs about what the float-atomic one does at D = 128, and 10-13 % more
at D = 64; on the portable kernels about 20 % more (docs/kernel-notes.md).
The same inputs then give the same dq whether a video runs alone or packed
with others (block_sparse_attn_varlen), as FastVideo's tests expect.
"""

from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

import vsa
from vsa._args import invalid_argument
from vsa.attention import block_map_shape


def _map_to_index(block_map: Tensor, batch: int = 1) -> Tuple[Tensor, Tensor]:
    """A block map [B, H, NQ, NK] (or [H, NQ, NK], for each of `batch` videos), any dtype read
    as bool -> int32 (q2k_idx [B, H, NQ, NK] ascending then -1, q2k_num [B, H, NQ])."""
    return vsa.map_to_index(logical_map(block_map, batch))


def logical_map(block_map: Tensor, batch: int = 1) -> Tensor:
    """A block map [B, H, NQ, NK] (or [H, NQ, NK]: the same map for each of `batch` videos),
    any dtype, as a 4-D bool map."""
    if block_map.dim() == 3:
        block_map = block_map.unsqueeze(0).expand(batch, -1, -1, -1)
    if block_map.dim() != 4:
        raise invalid_argument("block_map.shape", "[B, H, NQ, NK] or [H, NQ, NK]", list(block_map.shape))
    return block_map.to(torch.bool).contiguous()


def attention_map(block_map: Tensor, q: Tensor, k: Tensor, variable_block_sizes: Tensor,
                  layout: str = "bhsd") -> Tensor:
    """logical_map of the map a caller passed for q, k and variable_block_sizes, checked by the shape
    passed: the broadcast view of an [H, NQ, NK] map (or, on the 256-token path, the halves' map)
    would be named by a shape the caller never saw."""
    want = block_map_shape(q, k, variable_block_sizes, layout)
    if want is not None and list(block_map.shape) not in (want, want[1:]):
        raise invalid_argument("block_map.shape", f"[B, H, NQ, NK] = {want} or [H, NQ, NK] = {want[1:]} "
                               f"(B, H, NQ from q; NK = {want[3]}, variable_block_sizes' length)",
                               list(block_map.shape))
    return logical_map(block_map, q.shape[0])


def block_sparse_attn_from_indices(q: Tensor, k: Tensor, v: Tensor, q2k_idx: Tensor, q2k_num: Tensor,
                                   variable_block_sizes: Tensor) -> Tuple[Tensor, Tensor]:
    """q, k, v [B, H, S, D]; q2k_idx [B, H, NQ, max_kv] (first q2k_num entries read),
    q2k_num [B, H, NQ], variable_block_sizes [NK] -> (out, M)."""
    return vsa.block_sparse_attn(q, k, v, q2k_idx, q2k_num, variable_block_sizes, deterministic=True)


def block_sparse_attn(q: Tensor, k: Tensor, v: Tensor, block_map: Tensor,
                      variable_block_sizes: Tensor) -> Tuple[Tensor, Tensor]:
    """block_sparse_attn_from_indices with the lists given as a bool block map (a map
    [H, NQ, NK] serves every video of the batch)."""
    return vsa.block_sparse_attn_from_mask(q, k, v, attention_map(block_map, q, k, variable_block_sizes),
                                           variable_block_sizes, deterministic=True)


# FastVideo's per-backend ops compute the same function; code (and FastVideo's
# tests) that calls one by name gets vsa's kernel.
block_sparse_attn_triton = block_sparse_attn_from_indices
block_sparse_attn_sm90 = block_sparse_attn_from_indices
