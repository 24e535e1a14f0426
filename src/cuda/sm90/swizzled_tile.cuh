// Hopper tiles shared by the sm_90 kernels (forward and backward): a
// [64 rows][D] tile (128 rows for whole 128-token K/V blocks) of 16-bit
// elements in the 128-byte-swizzled layout that wgmma's shared-memory
// descriptors describe, its cp.async copy by one warpgroup or its TMA
// request by one thread, and its descriptors as a K-major or MN-major
// operand.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/block_lists.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/sm90/tma.cuh"
#include "cuda/sm90/wgmma.cuh"

namespace vsa::cuda::sm90 {

constexpr int kWarpgroupThreads = 128;

// Calls f with std::integral_constant<int, W> for the narrowest of the widths 64, 32 and 16
// that covers `rows` real rows (keys or query rows) of a 64-row tile: a partial block's tile is
// multiplied over its real rows only, on m64n16/m64n32 products or fewer k16 steps. The choice
// is uniform over the CTA, so f may hold barriers.
template <class F>
__device__ __forceinline__ void with_tile_width(int rows, F&& f) {
  if (rows > kTileRows / 2)
    f(std::integral_constant<int, kTileRows>{});
  else if (rows > kTileRows / 4)
    f(std::integral_constant<int, kTileRows / 2>{});
  else
    f(std::integral_constant<int, kTileRows / 4>{});
}

// A [kRows][D] tile in the 128-byte-swizzled layout: column blocks of 64
// elements, each [kRows][128 bytes], chunk c of row r at c ^ (r % 8). kRows
// is 64, or 128 for a whole 128-token K or V block (one wgmma m64n128
// operand, its 8-row groups evenly 1024 bytes apart down a column block).
template <int kHeadDim, int kRows = kTileRows>
struct SwizzledTile {
  static constexpr int kBlockBytes = kRows * 128;               // one 64-column block
  static constexpr int kBytes = kHeadDim / 64 * kBlockBytes;    // 8 KB per 64 columns and 64 rows
  __device__ static std::uint32_t offset(int row, int chunk) {  // chunk: 16 bytes
    return static_cast<std::uint32_t>((chunk / 8) * kBlockBytes + row * 128 + (((chunk % 8) ^ (row % 8)) << 4));
  }
};

// The CTA's 128 threads copy a [64][D] tile whose rows are `row_stride`
// elements apart. Each thread keeps one chunk column; passes step by whole
// swizzle periods, so its addresses advance by constants. Rows from
// `valid_rows` on are zeros, not copies (a partial block's padding keys:
// sm80::load_tile_async says why).
template <class Elem, int kHeadDim>
__device__ __forceinline__ void load_tile(std::uint32_t dst, const Elem* src, std::int64_t row_stride,
                                          int valid_rows = kTileRows) {
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kRowsPerPass = kWarpgroupThreads / kChunks;
  static_assert(kRowsPerPass % 8 == 0, "passes keep a thread's swizzle");
  const int row = static_cast<int>(threadIdx.x) / kChunks;
  const int chunk = static_cast<int>(threadIdx.x) % kChunks;
  const std::uint32_t dst0 = dst + SwizzledTile<kHeadDim>::offset(row, chunk);
  const Elem* src0 = src + row * row_stride + chunk * 8;
#pragma unroll
  for (int pass = 0; pass < kTileRows / kRowsPerPass; ++pass)
    ptx::cp_async_16_or_zero(dst0 + pass * kRowsPerPass * 128, src0 + pass * kRowsPerPass * row_stride,
                             row + pass * kRowsPerPass < valid_rows);
}

// All the boxes of such a tile from `row` of (head, batch) of a 4-D query map, one per 64
// columns, their bytes announced on `full` by the caller.
template <int kHeadDim>
__device__ __forceinline__ void load_query_tile_boxes(std::uint32_t dst, std::uint32_t full, const CUtensorMap& map,
                                                      std::int64_t row, int head, int batch) {
#pragma unroll
  for (int c = 0; c < kHeadDim / 64; ++c)
    tma_load_4d(dst + c * SwizzledTile<kHeadDim>::kBlockBytes, map, full, 64 * c, static_cast<int>(row), head, batch);
}

// A whole [64][D] tile from `row` of (head, batch) of a row-tile map (encode_bwd_query_maps:
// the column blocks are the map's third dimension), as one box; its bytes announced on `full`
// by the caller.
template <int kHeadDim>
__device__ __forceinline__ void load_query_tile_whole(std::uint32_t dst, std::uint32_t full, const CUtensorMap& map,
                                                      std::int64_t row, int head, int batch) {
  tma_load_5d(dst, map, full, 0, static_cast<int>(row), 0, head, batch);
}

// One thread's request for the [64][D] Q tile from `row` of (head, batch)
// of the 4-D query map: one box of 64 rows × 64 columns per 128-byte swizzle
// block, all completing on `full`.
template <int kHeadDim>
__device__ __forceinline__ void request_query_tile(std::uint32_t dst, std::uint32_t full, const CUtensorMap& map,
                                                   std::int64_t row, int head, int batch) {
  mbarrier_expect_bytes(full, SwizzledTile<kHeadDim>::kBytes);
  load_query_tile_boxes<kHeadDim>(dst, full, map, row, head, batch);
}

// One thread's request for the [kRows][D] K or V tile whose first key is
// `key` (a multiple of 64) from a 5-D key map (tensor_maps.hpp). With
// `pad_rows` > 0 (a 64-key tile only) the tile's real keys land in its last
// 64 − pad_rows rows and its first pad_rows rows are the box's out-of-bounds
// rows, which the TMA unit fills with zeros without reading memory: a partial
// block's padding keys are never read, and its V rows there are exactly 0.
template <int kHeadDim, int kRows = kTileRows>
__device__ __forceinline__ void request_key_tile(std::uint32_t dst, std::uint32_t full, const CUtensorMap& map,
                                                 std::int64_t key, int head, int batch, int pad_rows = 0) {
  using Tile = SwizzledTile<kHeadDim, kRows>;
  mbarrier_expect_bytes(full, Tile::kBytes);  // out-of-bounds rows count as delivered bytes
  const int tile = static_cast<int>(key / kTileRows);
#pragma unroll
  for (int c = 0; c < kHeadDim / 64; ++c)
#pragma unroll
    for (int h = 0; h < kRows / kTileRows; ++h)
      tma_load_5d(dst + c * Tile::kBlockBytes + h * kTileRows * 128, map, full, 64 * c, -pad_rows, tile + h, head,
                  batch);
}

// Rows [first_row, kRows) of a tile set to zero by the warpgroup's threads
// (generic-proxy stores: a wgmma reading them needs fence_proxy_async and a
// barrier first).
template <int kHeadDim, int kRows = kTileRows>
__device__ __forceinline__ void zero_rows(std::uint32_t tile, int first_row) {
  constexpr int kChunks = kHeadDim / 8;
  for (int i = first_row * kChunks + static_cast<int>(threadIdx.x) % kWarpgroupThreads; i < kRows * kChunks;
       i += kWarpgroupThreads)
    ptx::st_shared_zero16(tile + SwizzledTile<kHeadDim, kRows>::offset(i / kChunks, i % kChunks));
}

// Descriptors of a tile as a wgmma operand. K-major (the reduction runs
// along a row: Q and K in S = Q·Kᵀ): 8-row groups 1024 bytes apart, 32 bytes
// per k16 step inside a 64-column block. MN-major (the reduction runs down
// the rows: V in O += P·V, whose rows are keys): 64-column blocks
// kBlockBytes apart, 8-row groups 1024 apart, 16 rows per k16 step.
template <int kHeadDim, int kRows = kTileRows>
__device__ __forceinline__ std::uint64_t k_major_desc(std::uint32_t tile, int k_step) {
  return desc_advance(smem_desc(tile, 16, 1024),
                      (k_step / 4) * SwizzledTile<kHeadDim, kRows>::kBlockBytes + (k_step % 4) * 32);
}
template <int kHeadDim, int kRows = kTileRows>
__device__ __forceinline__ std::uint64_t mn_major_desc(std::uint32_t tile, int k_step) {
  return desc_advance(smem_desc(tile, SwizzledTile<kHeadDim, kRows>::kBlockBytes, 1024), k_step * 16 * 128);
}

}  // namespace vsa::cuda::sm90
