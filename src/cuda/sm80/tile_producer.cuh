// Producer side of the portable kernels (forward and backward): tiles of
// Q, K, V (and dO) rows copied global -> shared with cp.async, 16 bytes per
// thread per copy, into the swizzled layout their ldmatrix reads expect.
//
// Shared layout: a tile is [rows][D] elements; the 16-byte chunk c of row r sits
// at chunk position c ^ (r % 8). ldmatrix reads 8 rows at one chunk column,
// and the XOR spreads those 8 rows over all 32 banks (no conflicts).
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"
#include "cuda/common/block_lists.cuh"

namespace vsa::cuda::sm80 {

template <class Elem, int kHeadDim>
struct SmemTile {
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  static constexpr int kElems = kTileRows * kHeadDim;

  __device__ static int offset(int row, int chunk) {
    return row * kHeadDim + ((chunk ^ (row & 7)) << 3);
  }
};

// A lane's ldmatrix addresses in a swizzled tile, one XOR each. The lane
// reads row `row` (+ multiples of 8) at chunk `even + chunk_bit` for even,
// compile-time `even`. Rows are 128-byte aligned (tiles start at multiples of
// 128 bytes, rows are 128 or 256 bytes), so the swizzle of the low 3 chunk
// bits is an XOR on address bits 4-6, which the row part leaves zero:
// base carries the lane's row and chunk bit, and each read XORs in its chunk.
template <class Elem, int kHeadDim>
class SwizzledReader {
 public:
  __device__ SwizzledReader(const Elem* tile, int row, int chunk_bit)
      : base_(ptx::smem_addr(tile + row * kHeadDim) + ((((row & 7) ^ chunk_bit)) << 4)) {}

  // row_offset: a multiple of 8; even_chunk: an even chunk index.
  __device__ std::uint32_t at(int row_offset, int even_chunk) const {
    return (base_ ^ static_cast<std::uint32_t>((even_chunk & 7) << 4)) +
           static_cast<std::uint32_t>(((even_chunk >> 3) << 7) + row_offset * kHeadDim * static_cast<int>(sizeof(Elem)));
  }

 private:
  std::uint32_t base_;
};

// All threads of the CTA issue the copy of rows [0, kRows) starting at `src`,
// consecutive rows `row_stride` elements apart. Eight threads take a row's
// 128-byte runs in turn, a 16-byte chunk each, so each copy instruction reads
// whole 128-byte runs, and a pass covers a multiple of 8 rows (the swizzle
// period). A thread keeps its row and chunk columns across passes, and the
// swizzle only permutes chunks inside each group of 8, so its addresses
// advance by constants: one base address per row it copies (a 64-bit add per
// pass, the row stride being a run-time value), the runs of a row at
// immediate offsets from it. Rows from `valid_rows` on are
// written as zeros instead of copied: the padding keys of a partial block,
// which the caller may fill with anything, and which the products multiply
// by P = 0 or dS = 0 (0 · NaN would be NaN).
template <class Elem, int kHeadDim, int kThreads, int kRows = kTileRows>
__device__ __forceinline__ void load_tile_async(Elem* dst, const Elem* src, std::int64_t row_stride,
                                                int valid_rows = kRows) {
  using Tile = SmemTile<Elem, kHeadDim>;
  constexpr int kThreadsPerRow = 8;  // a 128-byte run of a row, a chunk each
  constexpr int kRowsPerPass = kThreads / kThreadsPerRow;
  constexpr int kChunksPerThread = Tile::kChunks / kThreadsPerRow;
  static_assert(Tile::kChunks % kThreadsPerRow == 0 && kRowsPerPass % 8 == 0 && kRows % kRowsPerPass == 0,
                "a thread's chunk columns keep their offsets under the swizzle");
  const int row = static_cast<int>(threadIdx.x) / kThreadsPerRow;
  const int chunk = static_cast<int>(threadIdx.x) % kThreadsPerRow;
  const std::uint32_t dst0 = ptx::smem_addr(dst + Tile::offset(row, chunk));
  const Elem* src0 = src + row * row_stride + chunk * 8;
  const int rows_left = valid_rows - row;  // so each pass compares with a constant
#pragma unroll
  for (int pass = 0; pass < kRows / kRowsPerPass; ++pass)
#pragma unroll
    for (int c = 0; c < kChunksPerThread; ++c)
      ptx::cp_async_16_or_zero(
          dst0 + (pass * kRowsPerPass * kHeadDim + c * kThreadsPerRow * 8) * static_cast<std::uint32_t>(sizeof(Elem)),
          src0 + pass * kRowsPerPass * row_stride + c * kThreadsPerRow * 8, pass * kRowsPerPass < rows_left);
}

}  // namespace vsa::cuda::sm80
