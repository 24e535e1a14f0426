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
template <class Elem, int kHeadDim, int kThreads>
__device__ __forceinline__ void load_tile_async(Elem* dst, const Elem* src, std::int64_t row_stride) {
  using Tile = SmemTile<Elem, kHeadDim>;
  constexpr int kCopies = kTileRows * Tile::kChunks / kThreads;
  static_assert(kTileRows * Tile::kChunks % kThreads == 0, "tile copies must divide evenly");
#pragma unroll
  for (int i = 0; i < kCopies; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * kThreads;
    const int row = c / Tile::kChunks;
    const int chunk = c % Tile::kChunks;
    ptx::cp_async_16(ptx::smem_addr(dst + Tile::offset(row, chunk)), src + row * row_stride + chunk * 8);
  }
}

}  // namespace vsa::cuda::sm80
