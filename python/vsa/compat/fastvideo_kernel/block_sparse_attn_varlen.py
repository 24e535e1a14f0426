"""fastvideo_kernel.block_sparse_attn_varlen on vsa: packed sequences of real tokens.

FastVideo's form takes the tokens packed without padding ([total, H, D], with
cu_seqlens in tokens) and per-sequence lists. This layer lays the tokens
into whole blocks ([1, H, S, D], the layout a single video runs in), with
sequence i's block b holding its next variable_block_sizes[b] tokens, runs
vsa.block_sparse_attn_varlen once over the packed blocks (deterministic dq,
as block_sparse_attn.py explains), and gathers the real query rows back.
Each video's rows then see exactly the arithmetic of running it alone.
Every step is differentiable in q, k and v.

Stricter than FastVideo where FastVideo would drop or invent tokens silently:
each sequence's KV block sizes must add up to its KV token count, its query
block sizes (when given) to its query token count, and without query block
sizes its tokens must fit its query blocks (full blocks, the last one cut).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch
from torch import Tensor

import vsa
from vsa._args import invalid_argument
from vsa._tensors import host_values

BLOCK_SIZE = 64


def _token_positions(counts: list, tokens: int, block: int, name: str, sequence: int) -> np.ndarray:
    """Padded positions of a sequence's tokens: block b's first counts[b] slots."""
    if any(c < 0 or c > block for c in counts):
        raise invalid_argument(f"{name}[{sequence}]", f"token counts in [0, {block}]", counts)
    if sum(counts) != tokens:
        raise invalid_argument(f"{name}[{sequence}]", f"block sizes adding up to the sequence's {tokens} tokens",
                               f"sum {sum(counts)}")
    return vsa._C.non_pad_index(counts, block)


def _token_rows(x: Tensor, offsets: list, name: str, tensor: str) -> Tensor:
    """The rows of x that the offsets give to sequences: [offsets[0], offsets[-1]). As in FastVideo,
    rows past the last offset (a padded token buffer) are no sequence's and are not read."""
    if offsets[0] < 0 or any(b < a for a, b in zip(offsets, offsets[1:])) or offsets[-1] > x.shape[0]:
        raise invalid_argument(name, f"non-decreasing token offsets within {tensor}'s {x.shape[0]} rows", offsets)
    return x[offsets[0]:offsets[-1]]


def _full_blocks_cut(tokens: int, num_blocks: int, block: int, sequence: int) -> list:
    if tokens > num_blocks * block:
        raise invalid_argument(f"cu_seqlens_q (sequence {sequence})",
                               f"at most {num_blocks} blocks x {block} query tokens", tokens)
    return [min(block, max(0, tokens - b * block)) for b in range(num_blocks)]


def _pack(x: Tensor, positions: Tensor, padded_length: int) -> Tensor:
    """[total, H, D] tokens -> [1, H, padded_length, D], zeros between them."""
    packed = x.new_zeros((x.shape[1], padded_length, x.shape[2]))
    return packed.index_copy(1, positions, x.transpose(0, 1)).unsqueeze(0)


def block_sparse_attn_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_kv: Tensor,
                             q2k_idx_list: Sequence[Tensor], q2k_num_list: Sequence[Tensor],
                             variable_block_sizes_list: Sequence[Tensor],
                             q_variable_block_sizes_list: Optional[Sequence[Tensor]] = None,
                             block_size: int = BLOCK_SIZE) -> Tensor:
    """q [total_q, H, D], k/v [total_kv, H, D]; cu_seqlens_q/kv [N+1] token offsets;
    per sequence i: q2k_idx_list[i] [1, H, Nq_i, Mk_i] (KV blocks of sequence i,
    numbered from 0), q2k_num_list[i] [1, H, Nq_i], variable_block_sizes_list[i]
    [Nkv_i], q_variable_block_sizes_list[i] [Nq_i] (default: full blocks).
    Sequence i's tokens are rows cu_seqlens[i]:cu_seqlens[i + 1] (rows past cu_seqlens[-1] are
    not read). Returns out [cu_seqlens_q[-1], H, D], as FastVideo does (rows before
    cu_seqlens_q[0] are zero)."""
    for name, t in (("q", q), ("k", k), ("v", v)):  # their rows, heads and dims are read below
        if t.dim() != 3:
            raise invalid_argument(f"{name}.shape", "[total, H, D] tokens", list(t.shape))
    cu_q, cu_kv = host_values(cu_seqlens_q, "cu_seqlens_q"), host_values(cu_seqlens_kv, "cu_seqlens_kv")
    if len(cu_q) < 2:
        raise invalid_argument("cu_seqlens_q", "N + 1 token offsets of N >= 1 sequences", cu_q)
    sequences = len(cu_q) - 1
    for name, items in (("cu_seqlens_kv", cu_kv), ("q2k_idx_list", q2k_idx_list), ("q2k_num_list", q2k_num_list),
                        ("variable_block_sizes_list", variable_block_sizes_list)):
        if len(items) != sequences + (name == "cu_seqlens_kv"):
            raise invalid_argument(name, f"one entry per sequence ({sequences}, from cu_seqlens_q)", len(items))
    q_rows = _token_rows(q, cu_q, "cu_seqlens_q", "q")
    k_rows, v_rows = (_token_rows(t, cu_kv, "cu_seqlens_kv", name) for name, t in (("k", k), ("v", v)))
    q_positions, kv_positions, q_blocks, kv_blocks = [], [], [0], [0]  # positions: one array per sequence
    heads = q.shape[1]
    for i in range(sequences):
        nq, nkv = q2k_num_list[i].shape[-1], variable_block_sizes_list[i].numel()
        if tuple(q2k_num_list[i].shape) != (1, heads, nq):
            raise invalid_argument(f"q2k_num_list[{i}].shape", f"[1, {heads}, Nq] (one sequence, q's heads)",
                                   list(q2k_num_list[i].shape))
        if q2k_idx_list[i].dim() != 4 or tuple(q2k_idx_list[i].shape[:3]) != (1, heads, nq):
            raise invalid_argument(f"q2k_idx_list[{i}].shape", f"[1, {heads}, {nq}, Mk] (as q2k_num_list[{i}])",
                                   list(q2k_idx_list[i].shape))
        q_counts = (_full_blocks_cut(cu_q[i + 1] - cu_q[i], nq, block_size, i) if q_variable_block_sizes_list is None
                    else host_values(q_variable_block_sizes_list[i], f"q_variable_block_sizes_list[{i}]"))
        if len(q_counts) != nq:
            raise invalid_argument(f"q_variable_block_sizes_list[{i}].shape",
                                   f"[{nq}], one per query block of q2k_num_list[{i}]", [len(q_counts)])
        q_positions.append(q_blocks[-1] * block_size + _token_positions(
            q_counts, cu_q[i + 1] - cu_q[i], block_size, "q_variable_block_sizes_list", i))
        kv_positions.append(kv_blocks[-1] * block_size + _token_positions(
            host_values(variable_block_sizes_list[i], f"variable_block_sizes_list[{i}]"), cu_kv[i + 1] - cu_kv[i],
            block_size, "variable_block_sizes_list", i))
        q_blocks.append(q_blocks[-1] + nq)
        kv_blocks.append(kv_blocks[-1] + nkv)

    device = q.device
    q_at = torch.from_numpy(np.concatenate(q_positions)).to(device)
    kv_at = torch.from_numpy(np.concatenate(kv_positions)).to(device)
    width = max(idx.shape[-1] for idx in q2k_idx_list)
    local_idx = torch.cat([torch.nn.functional.pad(idx.to(device), (0, width - idx.shape[-1]),
                                                   value=-1)
                           for idx in q2k_idx_list], dim=2)
    q2k_num = torch.cat([num.to(device) for num in q2k_num_list], dim=2)
    vbs = torch.cat([sizes.to(device) for sizes in variable_block_sizes_list])

    out, _ = vsa.block_sparse_attn_varlen(
        _pack(q_rows, q_at, q_blocks[-1] * block_size), _pack(k_rows, kv_at, kv_blocks[-1] * block_size),
        _pack(v_rows, kv_at, kv_blocks[-1] * block_size), local_idx, q2k_num, vbs,
        torch.tensor(q_blocks, device=device), torch.tensor(kv_blocks, device=device),
        deterministic=True)
    out = out[0].index_select(1, q_at).transpose(0, 1)
    if cu_q[0] > 0:
        out = torch.cat([out.new_zeros((cu_q[0], *out.shape[1:])), out])
    return out.contiguous()
