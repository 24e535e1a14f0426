"""fastvideo_kernel.vsa_utils on vsa: the tiling metadata of a (T, H, W) latent.

Every helper reads vsa's metadata (computed by vsa's C++ tiling, cached per
latent shape, tile and device), so the tensors are shared between calls, as
FastVideo's cached helpers share theirs: treat them as read-only. dtypes
follow FastVideo: int64 indices, int32 block sizes.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

import vsa
from vsa._args import count_value, invalid_argument
from vsa._tensors import host_counts
from vsa.metadata import VSAMetadata, _normalized_device

VSA_TILE_SIZE = (4, 4, 4)
# Tile volumes vsa runs: 64 and 128 natively, 256 as 128-token halves.
_SUPPORTED_VSA_BLOCK_VOLUMES = (64, 128, 256)


def _canonicalize_device(device) -> torch.device:
    """A device as a cache key: bare 'cuda' becomes the current CUDA device."""
    return _normalized_device(device)


def _metadata(dit_seq_shape, tile_size, device) -> VSAMetadata:
    return vsa.build_vsa_metadata(dit_seq_shape, tile_size, _canonicalize_device(device))


def get_tile_partition_indices(dit_seq_shape, tile_size, device) -> Tensor:
    """[T*H*W] int64: the raster index of each token in tiled order."""
    return _metadata(dit_seq_shape, tile_size, device).tile_partition_indices


def get_reverse_tile_partition_indices(dit_seq_shape, tile_size, device) -> Tensor:
    """[T*H*W] int64: the inverse permutation (tiled order back to raster)."""
    return _metadata(dit_seq_shape, tile_size, device).reverse_tile_partition_indices


def construct_variable_block_sizes(dit_seq_shape, num_tiles, device, tile_size=VSA_TILE_SIZE) -> Tensor:
    """[prod(num_tiles)] int32: valid tokens of each tile. num_tiles must be the
    tile counts of this shape and tile (ceil division on each axis)."""
    meta = _metadata(dit_seq_shape, tile_size, device)
    if tuple(int(n) for n in num_tiles) != meta.tile_counts:
        raise invalid_argument("num_tiles", f"{meta.tile_counts}, the tiles of {tuple(dit_seq_shape)} "
                               f"in {tuple(tile_size)} tiles", tuple(num_tiles))
    return meta.variable_block_sizes


def get_non_pad_index(variable_block_sizes: Tensor, max_block_size: int) -> Tensor:
    """int64 positions of the real tokens in the padded sequence (block b at
    [b * max_block_size, (b + 1) * max_block_size)), on the sizes' device."""
    block = count_value(max_block_size)  # int() made 64.5 a 64
    if block is None or block < 1:
        raise invalid_argument("max_block_size", "a positive token count", repr(max_block_size))
    counts = host_counts(variable_block_sizes, "variable_block_sizes", block)  # one device read on CUDA
    return torch.from_numpy(vsa._C.non_pad_index(counts, block)).to(variable_block_sizes.device)


def build_vsa_metadata(dit_seq_shape, tile_size=VSA_TILE_SIZE, device="cuda") -> dict:
    """Everything VSA needs about a (T, H, W) latent, as FastVideo's dict: tile_partition_indices,
    reverse_tile_partition_indices, variable_block_sizes, non_pad_index, num_tiles, max_block_size."""
    volume = math.prod(tile_size)
    if volume not in _SUPPORTED_VSA_BLOCK_VOLUMES:
        raise ValueError(f"Unsupported VSA tile volume {volume} for tile_size={tuple(tile_size)}: vsa runs "
                         f"tiles of {', '.join(map(str, _SUPPORTED_VSA_BLOCK_VOLUMES))} tokens")
    meta = _metadata(dit_seq_shape, tile_size, device)
    return {
        "tile_partition_indices": meta.tile_partition_indices,
        "reverse_tile_partition_indices": meta.reverse_tile_partition_indices,
        "variable_block_sizes": meta.variable_block_sizes,
        "non_pad_index": meta.non_pad_index,
        "num_tiles": meta.tile_counts,
        "max_block_size": meta.block_size,
    }
