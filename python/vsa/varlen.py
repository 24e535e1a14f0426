"""Variable-length batches: several sequences packed into one, each attending
only within itself (contract: docs/varlen.md).

The lists arrive local to each sequence; pack_varlen_index moves them onto
the packed sequence (each id plus its sequence's first KV block), and the
ordinary block_sparse_attn runs once over the packed tensors. A sequence's
partial last block needs nothing special: variable_block_sizes already masks
the keys past each block's valid count, so one sequence's padding is never
attended by another, and the same kernels (forward and backward) serve.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from vsa._args import invalid_argument
from vsa.attention import block_sparse_attn
from vsa.metadata import pack_varlen_index


def _expect_offsets_end(offsets: Tensor, blocks: int, name: str, what: str) -> None:
    """The offsets must end within the packed blocks, or the packed lists name
    blocks past the tensors. Checked where it costs no device sync (offsets
    on the CPU, outside torch.compile); on CUDA it is a precondition, as the
    list values of block_sparse_attn are."""
    # Offsets of any other rank are the core's to refuse, by their shape.
    if offsets.device.type != "cpu" or torch.compiler.is_compiling() or offsets.dim() != 1 or offsets.numel() == 0:
        return
    end = int(offsets[-1])
    if end > blocks:
        raise invalid_argument(name, f"offsets ending at most at {what} = {blocks}", f"ends at {end}")


def block_sparse_attn_varlen(q: Tensor, k: Tensor, v: Tensor, q2k_idx: Tensor, q2k_num: Tensor,
                             variable_block_sizes: Tensor, cu_q_blocks: Tensor,
                             cu_kv_blocks: Tensor, *, scale: Optional[float] = None,
                             need_lse: bool = True, layout: str = "bhsd",
                             deterministic: Optional[bool] = None
                             ) -> tuple[Tensor, Optional[Tensor]]:
    """block_sparse_attn over N sequences packed one after another.

    q [B, H, NQ*blk, D] and k, v [B, Hkv, NK*blk, D] ("bhsd"; [B, S, H, D] with
    layout="bshd") hold the sequences back to back, each padded to whole
    blocks. cu_q_blocks, cu_kv_blocks [N+1]: where each sequence's blocks
    start (0 first, non-decreasing; cu_q_blocks ends at NQ, cu_kv_blocks at
    NK). q2k_idx [B, H, NQ, max_kv] lists, for each query block, KV blocks of
    its own sequence numbered from 0 within that sequence; q2k_num [B, H, NQ]
    counts them. variable_block_sizes [NK]: valid tokens of each packed KV
    block (so each sequence's partial last block is masked).

    Returns (out, lse) exactly as block_sparse_attn on the packed lists, which
    is what running each sequence alone gives: rows of sequence s see only
    the keys of sequence s. Differentiable in q, k and v.
    """
    if variable_block_sizes.dim() == 1:  # vbs of another rank: the core names it (not an IndexError here)
        _expect_offsets_end(cu_kv_blocks, variable_block_sizes.shape[0], "cu_kv_blocks", "NK")
    packed_idx = pack_varlen_index(q2k_idx, q2k_num, cu_q_blocks, cu_kv_blocks)
    return block_sparse_attn(q, k, v, packed_idx, q2k_num, variable_block_sizes, scale=scale,
                             need_lse=need_lse, layout=layout, deterministic=deterministic)
