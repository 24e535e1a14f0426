// Where the stored-dS path keeps a pair's dSᵀ tile (kernel_params.hpp): the
// key pass that writes it and the dQ passes (both families) that read it find
// it by the same arithmetic, from the pair's KV->Q list entry. What a tile
// holds is each family's own: the portable kernels store their shared-memory
// tile (copy_stored_ds_rows reads it), the Hopper ones their register
// fragments (sm90/stored_ds_fragments.cuh).
#pragma once

#include <cstdint>

#include "cuda/common/block_lists.cuh"
#include "cuda/common/kernel_params.hpp"
#include "cuda/common/ptx.cuh"
#include "cuda/common/query_scheduler.cuh"

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

// A stored [64 keys][64 rows] dSᵀ tile of 16-bit elements.
constexpr int kStoredDsTileBytes = kTileRows * kTileRows * 2;

// The portable dQ pass's copy of the stored tile at `src` into shared memory at `dst`, by the
// CTA's kThreads threads (cp.async, committed by the caller): only the first `valid` keys' rows
// (a row is 128 bytes, 8 chunks) are read, the others zero-filled, as a padding key's dS is 0
// (P = 0 there). The tile's swizzle stays within each row, so rows keep their places.
template <int kThreads>
__device__ __forceinline__ void copy_stored_ds_rows(std::uint32_t dst, const unsigned char* src, int valid) {
  constexpr int kChunksPerRow = kTileRows * 2 / 16;
#pragma unroll
  for (int i = 0; i < kStoredDsTileBytes / 16 / kThreads; ++i) {
    const int chunk = static_cast<int>(threadIdx.x) + i * kThreads;
    ptx::cp_async_16_or_zero(dst + 16 * chunk, src + 16 * chunk, chunk / kChunksPerRow < valid);
  }
}

// A dQ pass CTA's 64-row query tile, in a grid of query tiles × the group's
// query heads, and the stored dSᵀ tiles of its list.
class StoredDsQueryTile {
 public:
  __device__ explicit StoredDsQueryTile(const BwdKernelParams& p)
      : p_(p),
        head_(p.ds_first_unit * p.kv_group + static_cast<int>(blockIdx.y)),  // batch · H + query head
        sched_(p, head_ / p.heads, head_ % p.heads, static_cast<int>(blockIdx.x)),
        first_entry_(stored_ds_first_entry(p)),
        tile_shift_(p.block == 2 * kTileRows ? 1 : 0),
        row_tile_(static_cast<int>(blockIdx.x) & ((1 << tile_shift_) - 1)) {}

  // The dQ pass's grid: a CTA per 64-row query tile of the group's `query_heads` heads.
  static dim3 grid(const BwdKernelParams& p, int query_heads) {
    return dim3(static_cast<unsigned>(p.num_q_blocks * (p.block / kTileRows)), static_cast<unsigned>(query_heads));
  }

  __device__ const QueryScheduler<kTileRows, BwdKernelParams>& scheduler() const { return sched_; }
  // The stored tile of the list's 64-key tile t.
  __device__ const unsigned char* tile(int t) const {
    const std::int64_t entry = __ldg(p_.ds_slots + sched_.list_entry(t)) - first_entry_;
    return p_.ds_tiles + stored_ds_tile(entry, row_tile_, t & ((1 << tile_shift_) - 1), tile_shift_) *
                             static_cast<std::int64_t>(kStoredDsTileBytes);
  }

 private:
  const BwdKernelParams& p_;
  int head_;
  QueryScheduler<kTileRows, BwdKernelParams> sched_;
  int first_entry_, tile_shift_, row_tile_;  // row_tile_: of the query block
};

}  // namespace vsa::cuda
