"""Metadata for block-sparse attention.

- Block lists, as torch custom ops (captured by torch.compile, no host sync):
  map_to_index, invert_indices, topk_to_index, and pack_varlen_index for
  variable-length batches (several sequences packed into one).
- The VSA tiling of a (T, H, W) video latent: build_vsa_metadata (cached) and
  the tile / untile helpers moving a raster sequence into the padded tiled
  layout the attention runs on, and back.

Results match FastVideo's vsa_utils for the same inputs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode

from vsa import _C
from vsa._args import count_value, invalid_argument
from vsa._tensors import expect_same_device, index_tensor
from vsa.dispatch import launch


def _rank4(shape) -> tuple[int, int, int, int]:
    # Fake kernels need a shape even for inputs the core will reject; a
    # placeholder keeps them from failing first with an unhelpful IndexError.
    return tuple(shape) if len(shape) == 4 else (0, 0, 0, 0)


# ---- block lists ---------------------------------------------------------------------------------


def _new_lists(like: Tensor) -> tuple[Tensor, Tensor]:
    """Empty int32 (q2k_idx, q2k_num) shaped after a [B, H, NQ, N] input."""
    b, h, nq, n = _rank4(like.shape)
    return (like.new_empty((b, h, nq, n), dtype=torch.int32),
            like.new_empty((b, h, nq), dtype=torch.int32))


@torch.library.custom_op("vsa::map_to_index", mutates_args=())
def _map_to_index(block_map: Tensor) -> tuple[Tensor, Tensor]:
    q2k_idx, q2k_num = _new_lists(block_map)
    launch(_C.map_to_index, (block_map,), (q2k_idx, q2k_num))
    return q2k_idx, q2k_num


@_map_to_index.register_fake
def _map_to_index_fake(block_map):
    return _new_lists(block_map)


def map_to_index(block_map: Tensor) -> tuple[Tensor, Tensor]:
    """bool block_map [B, H, NQ, NK] -> (q2k_idx [B, H, NQ, NK], q2k_num [B, H, NQ]), int32.

    Each row lists its selected KV blocks ascending; entries past the count are -1.
    """
    return _map_to_index(block_map.contiguous())


def _new_inverse_lists(q2k_idx: Tensor, num_kv_blocks: int, max_q: int) -> tuple[Tensor, Tensor]:
    """Empty int32 (k2q_idx [B, H, NK, max_q], k2q_num [B, H, NK]) for a q2k_idx [B, H, NQ, N]."""
    b, h, _, _ = _rank4(q2k_idx.shape)
    return (q2k_idx.new_empty((b, h, num_kv_blocks, max_q), dtype=torch.int32),
            q2k_idx.new_empty((b, h, num_kv_blocks), dtype=torch.int32))


@torch.library.custom_op("vsa::invert_indices", mutates_args=())
def _invert_indices(q2k_idx: Tensor, q2k_num: Tensor, num_kv_blocks: int,
                    max_q: int) -> tuple[Tensor, Tensor]:
    k2q_idx, k2q_num = _new_inverse_lists(q2k_idx, num_kv_blocks, max_q)
    launch(_C.invert_indices, (q2k_idx, q2k_num), (k2q_idx, k2q_num), num_kv_blocks)
    return k2q_idx, k2q_num


@_invert_indices.register_fake
def _invert_indices_fake(q2k_idx, q2k_num, num_kv_blocks, max_q):
    return _new_inverse_lists(q2k_idx, num_kv_blocks, max_q)


def invert_indices(q2k_idx: Tensor, q2k_num: Tensor, num_kv_blocks: int,
                   max_q: Optional[int] = None) -> tuple[Tensor, Tensor]:
    """Q->KV lists -> KV->Q lists (k2q_idx [B, H, NK, max_q], k2q_num [B, H, NK]), int32.

    KV block j lists the query blocks whose first q2k_num entries name it,
    ascending, once per occurrence; entries past the count are -1. max_q
    defaults to NQ, enough when no row lists a block twice.
    """
    expect_same_device("q2k_idx", q2k_idx, q2k_num=q2k_num)
    kv_blocks = count_value(num_kv_blocks)  # int() made 2.5 a silent 2, and -1 a torch error
    if kv_blocks is None or kv_blocks < 1:
        raise invalid_argument("num_kv_blocks", "a positive int (KV blocks, NK)", repr(num_kv_blocks))
    capacity = (q2k_idx.shape[2] if q2k_idx.dim() == 4 else 1) if max_q is None else count_value(max_q)
    if capacity is None or capacity < 1:  # else the error would name k2q_idx, the output it sizes
        raise invalid_argument("max_q", "a positive int (query blocks a KV block can list) or None", repr(max_q))
    return _invert_indices(index_tensor(q2k_idx, "q2k_idx"), index_tensor(q2k_num, "q2k_num"),
                           kv_blocks, capacity)


@torch.library.custom_op("vsa::topk_to_index", mutates_args=())
def _topk_to_index(topk: Tensor) -> tuple[Tensor, Tensor]:
    q2k_idx, q2k_num = _new_lists(topk)
    launch(_C.topk_to_index, (topk,), (q2k_idx, q2k_num))
    return q2k_idx, q2k_num


@_topk_to_index.register_fake
def _topk_to_index_fake(topk):
    return _new_lists(topk)


def topk_to_index(topk: Tensor) -> tuple[Tensor, Tensor]:
    """top-k block ids [B, H, NQ, K] (any order) -> (q2k_idx sorted ascending, q2k_num = K), int32."""
    return _topk_to_index(index_tensor(topk, "topk"))


@torch.library.custom_op("vsa::pack_varlen_index", mutates_args=())
def _pack_varlen_index(local_idx: Tensor, q2k_num: Tensor, cu_q_blocks: Tensor,
                       cu_kv_blocks: Tensor) -> Tensor:
    packed_idx = local_idx.new_empty(local_idx.shape, dtype=torch.int32)
    launch(_C.pack_varlen_index, (local_idx, q2k_num, cu_q_blocks, cu_kv_blocks), (packed_idx,))
    return packed_idx


@_pack_varlen_index.register_fake
def _pack_varlen_index_fake(local_idx, q2k_num, cu_q_blocks, cu_kv_blocks):
    return local_idx.new_empty(local_idx.shape, dtype=torch.int32)


def halve_block_sizes(variable_block_sizes: Tensor, half: int) -> Tensor:
    """Each block's valid-token count as the counts of its two halves of `half` tokens:
    [NK] -> [2 * NK] int64, min(n, half) then max(n - half, 0).

    A count out of [0, 2 * half] stays out of [0, half] in one of its halves (a negative
    one in the first, one past 2 * half in the second), so the core refuses it as it refuses
    the count itself; clamping made it a full or an empty block. Any integer dtype."""
    counts = index_tensor(variable_block_sizes, "variable_block_sizes").long()
    if counts.dim() != 1:  # the reshape below would flatten [[256, 200]] into two blocks' counts
        raise invalid_argument("variable_block_sizes", "rank 1", f"rank {counts.dim()} {list(counts.shape)}")
    return torch.stack([counts.clamp(max=half), (counts - half).clamp(min=0)], dim=-1).reshape(-1)


def pack_varlen_index(local_idx: Tensor, q2k_num: Tensor, cu_q_blocks: Tensor,
                      cu_kv_blocks: Tensor) -> Tensor:
    """Block lists local to each sequence of a packed batch -> lists over the packed sequence.

    cu_q_blocks, cu_kv_blocks [N+1]: block offsets of the N sequences (0 first,
    non-decreasing, cu_q_blocks ending at NQ). local_idx [B, H, NQ, max_kv]
    names, for each query block, KV blocks of its own sequence numbered from 0
    in it; q2k_num [B, H, NQ] counts them. Returns int32 [B, H, NQ, max_kv]:
    each listed id plus its sequence's first KV block, -1 past the count, to
    use with q2k_num in block_sparse_attn. Checked on the CPU; on CUDA the
    values are a precondition (docs/varlen.md).
    """
    expect_same_device("local_idx", local_idx, q2k_num=q2k_num, cu_q_blocks=cu_q_blocks,
                       cu_kv_blocks=cu_kv_blocks)
    cu_q, cu_kv = index_tensor(cu_q_blocks, "cu_q_blocks"), index_tensor(cu_kv_blocks, "cu_kv_blocks")
    # The core takes both offsets in one dtype: the wider of the two, since narrowing int64
    # offsets to int32 ones would make 2^32 + j a j the checks accept.
    offsets = torch.promote_types(cu_q.dtype, cu_kv.dtype)
    return _pack_varlen_index(index_tensor(local_idx, "local_idx"), index_tensor(q2k_num, "q2k_num"),
                              cu_q.to(offsets), cu_kv.to(offsets))


# ---- the VSA tiling of a video latent --------------------------------------------------------------


@dataclass(frozen=True)
class VSAMetadata:
    """How a (T, H, W) latent maps onto 64-token (tile-volume) blocks.

    Tensors are shared by every caller of build_vsa_metadata with the same
    arguments (it caches): treat them as read-only.
    """

    latent_shape: tuple[int, int, int]
    tile_size: tuple[int, int, int]
    tile_counts: tuple[int, int, int]  # tiles along T, H, W (FastVideo's "num_tiles")
    num_tiles: int  # blocks in the padded sequence: the product of tile_counts
    block_size: int  # tokens per block: the tile volume (FastVideo's "max_block_size")
    tile_partition_indices: Tensor  # [T*H*W] int64: raster index of each token in tiled order
    reverse_tile_partition_indices: Tensor  # [T*H*W] int64: the inverse permutation
    variable_block_sizes: Tensor  # [num_tiles] int32: valid tokens per tile
    non_pad_index: Tensor  # [T*H*W] int64: positions of real tokens in the padded sequence
    padded_position: Tensor  # [T*H*W] int64: padded position of each raster token

    @property
    def padded_length(self) -> int:
        return self.num_tiles * self.block_size


def _triple(value, name: str) -> tuple[int, int, int]:
    # Counts, as count_value reads them: int() made 2.5 a silent 2, the tiling of another latent.
    extents = tuple(map(count_value, value)) if isinstance(value, Iterable) else ()
    if len(extents) != 3 or any(n is None or n < 1 for n in extents):
        raise invalid_argument(name, "three positive extents (T, H, W)", repr(value))
    return extents


def _normalized_device(device) -> torch.device:
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


@functools.lru_cache(maxsize=32)
@torch.inference_mode(False)  # cached for later calls: inference tensors could not be saved for backward
def _build(latent: tuple[int, int, int], tile: tuple[int, int, int],
           device: torch.device) -> VSAMetadata:
    def on_device(array, dtype=torch.int64):
        return torch.from_numpy(array).to(device=device, dtype=dtype)

    block = math.prod(tile)
    vbs = _C.variable_block_sizes(latent, tile)
    order = _C.tile_partition_indices(latent, tile)
    reverse = _C.reverse_tile_partition_indices(latent, tile)
    non_pad = _C.non_pad_index(vbs.tolist(), block)
    return VSAMetadata(
        latent_shape=latent,
        tile_size=tile,
        tile_counts=tuple(-(-n // t) for n, t in zip(latent, tile)),
        num_tiles=_C.num_tiles(latent, tile),
        block_size=block,
        tile_partition_indices=on_device(order),
        reverse_tile_partition_indices=on_device(reverse),
        variable_block_sizes=on_device(vbs, torch.int32),
        non_pad_index=on_device(non_pad),
        padded_position=on_device(non_pad[reverse]),
    )


def build_vsa_metadata(latent_shape, tile_size=(4, 4, 4), device="cpu") -> VSAMetadata:
    """Everything VSA needs about a (T, H, W) latent, cached per (shape, tile, device).

    Computed on the host once, then copied to `device`; call it outside the
    compiled region (it is not a traced op).
    """
    args = (_triple(latent_shape, "latent_shape"), _triple(tile_size, "tile_size"), _normalized_device(device))
    # Under a dispatch mode (a fake tensor trace: torch.export, non-strict) the tensors built are
    # the mode's: built for this call alone, since cached they would serve every later call.
    if _get_current_dispatch_mode() is not None:
        return _build.__wrapped__(*args)
    return _build(*args)


def tile(x: Tensor, meta: VSAMetadata, dim: int = 1) -> Tensor:
    """Raster sequence (T*H*W tokens along `dim`, e.g. [B, S, H, D]) -> the padded
    tiled sequence (num_tiles * block_size tokens); pad positions are zero."""
    _expect_length(x, dim, meta.tile_partition_indices.numel(), "x", "T*H*W")
    shape = list(x.shape)
    shape[dim] = meta.padded_length
    return x.new_zeros(shape).index_copy(dim, meta.padded_position, x)


def untile(y: Tensor, meta: VSAMetadata, dim: int = 1) -> Tensor:
    """Inverse of tile: the padded tiled sequence -> the raster sequence (pads dropped)."""
    _expect_length(y, dim, meta.padded_length, "y", "num_tiles * block_size")
    return y.index_select(dim, meta.padded_position)


def _expect_length(t: Tensor, dim: int, length: int, name: str, what: str) -> None:
    axis = count_value(dim)  # not a bool: True would be axis 1
    if t.dim() > 0 and (axis is None or not -t.dim() <= axis < t.dim()):
        raise invalid_argument("dim", f"an axis of {name} (rank {t.dim()})", repr(dim))
    if t.dim() == 0 or t.shape[dim] != length:
        raise invalid_argument(f"{name}.shape", f"{what} = {length} tokens along dim {dim}",
                               list(t.shape))
