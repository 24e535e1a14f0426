"""fastvideo_kernel.triton_kernels.index on vsa's metadata ops (any device, no Triton).

Results are FastVideo's for the same inputs, and a little more defined: lists
come out ascending and entries past each count are -1 (FastVideo's inverted
lists are in atomic order with the tail left unwritten).
"""

from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

import vsa
from vsa.compat.fastvideo_kernel.block_sparse_attn import _map_to_index


def map_to_index(block_map: Tensor) -> Tuple[Tensor, Tensor]:
    """bool block_map [B, H, NQ, NK] -> int32 (index [B, H, NQ, NK], index_num [B, H, NQ])."""
    return _map_to_index(block_map)


def invert_indices(q2k_idx: Tensor, q2k_num: Tensor, num_kv_blocks: int) -> Tuple[Tensor, Tensor]:
    """Q->KV lists -> int32 KV->Q lists (k2q_idx [B, H, NK, NQ], k2q_num [B, H, NK])."""
    return vsa.invert_indices(q2k_idx, q2k_num, num_kv_blocks)


def topk_index_to_map(index: Tensor, num_kv_blocks: int, transpose_map: bool = False) -> Tensor:
    """top-k block ids [B, H, NQ, K] -> bool map [B, H, NQ, NK] (with transpose_map, a
    [B, H, NQ, NK] view of a [B, H, NK, NQ] tensor, as FastVideo returns it)."""
    b, h, nq, _ = index.shape
    if not transpose_map:
        block_map = torch.zeros((b, h, nq, num_kv_blocks), dtype=torch.bool, device=index.device)
    else:
        block_map = torch.zeros((b, h, num_kv_blocks, nq), dtype=torch.bool, device=index.device).transpose(2, 3)
    return block_map.scatter_(-1, index.long(), True)
