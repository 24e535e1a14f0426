// Producer side of the portable forward kernel: 64-row tiles of Q, K and V
// copied global -> shared with cp.async, 16 bytes per thread per copy.
//
// Shared layout: a tile is [64][D] elements; the 16-byte chunk c of row r sits
// at chunk position c ^ (r % 8). ldmatrix reads 8 rows at one chunk column,
// and the XOR spreads those 8 rows over all 32 banks (no conflicts).
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"
#include "cuda/sm80/fwd_scheduler.cuh"

namespace vsa::cuda::sm80 {

template <class Elem, int kHeadDim>
struct SmemTile {
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  static constexpr int kElems = kTileRows * kHeadDim;

  __device__ static int offset(int row, int chunk) {
    return row * kHeadDim + ((chunk ^ (row & 7)) << 3);
  }
};

// All threads of the CTA issue the copy of rows [0, 64) starting at `src`,
// consecutive rows `row_stride` elements apart; consecutive threads take
// consecutive chunks of a row, so each row is one coalesced 128/256-byte read.
// A thread keeps one chunk column and steps down the rows, so its addresses
// advance by constants: one base address, then adds.
template <class Elem, int kHeadDim, int kThreads>
__device__ __forceinline__ void load_tile_async(Elem* dst, const Elem* src, std::int64_t row_stride) {
  using Tile = SmemTile<Elem, kHeadDim>;
  constexpr int kRowsPerPass = kThreads / Tile::kChunks;
  static_assert(kThreads % Tile::kChunks == 0 && kTileRows % kRowsPerPass == 0 && kRowsPerPass % 8 == 0,
                "each pass covers whole rows, and rows a pass apart share their swizzle");
  const int row = static_cast<int>(threadIdx.x) / Tile::kChunks;
  const int chunk = static_cast<int>(threadIdx.x) % Tile::kChunks;
  const std::uint32_t dst0 = ptx::smem_addr(dst + Tile::offset(row, chunk));
  const Elem* src0 = src + row * row_stride + chunk * 8;
#pragma unroll
  for (int pass = 0; pass < kTileRows / kRowsPerPass; ++pass)
    ptx::cp_async_16(dst0 + pass * kRowsPerPass * kHeadDim * static_cast<std::uint32_t>(sizeof(Elem)),
                     src0 + pass * kRowsPerPass * row_stride);
}

}  // namespace vsa::cuda::sm80
