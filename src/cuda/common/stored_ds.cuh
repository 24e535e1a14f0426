// Where the stored-dS path keeps a pair's dSᵀ tile (kernel_params.hpp): the
// key pass that writes it and the dQ pass that reads it find it by the same
// arithmetic, from the pair's KV->Q list entry.
#pragma once

#include <cstdint>

#include "cuda/common/kernel_params.hpp"

namespace vsa::cuda {

// The group's first KV->Q entry: where the lists of its first unit's first query head start.
__device__ __forceinline__ int stored_ds_first_entry(const BwdKernelParams& p) {
  return __ldg(p.k2q_offsets + static_cast<std::int64_t>(p.ds_first_unit) * p.kv_group * p.num_kv_blocks);
}

// The tile's place among the group's: its entry less the group's first, times (blk/64)², plus
// its 64-row tile of the query block and 64-key tile of the KV block (tile_shift: log2(blk/64)).
__device__ __forceinline__ std::int64_t stored_ds_tile(std::int64_t entry_in_group, int row_tile, int key_tile,
                                                       int tile_shift) {
  return ((entry_in_group << tile_shift | row_tile) << tile_shift) | key_tile;
}

}  // namespace vsa::cuda
