// Epilogue of the portable forward kernel: normalize O by the row sums, write
// it through shared memory as 16-byte coalesced stores, and write the base-2
// LSE. Rows that saw no key get O = 0 and lse = kEmptyRowLse.
#pragma once

#include <cstdint>

#include "cuda/common/numeric.cuh"
#include "cuda/sm80/fwd_consumer.cuh"
#include "vsa/attention.hpp"

namespace vsa::cuda::sm80 {

// `stage` is the CTA's shared Q tile: each warp stages its output rows over
// its own Q rows, which no other warp reads, so no CTA barrier is needed.
template <class Elem, int kHeadDim, int kRowTiles>
__device__ void write_output(const FwdConsumer<Elem, kHeadDim, kRowTiles>& c, Elem* stage, Elem* out_rows,
                             std::int64_t out_row_stride, float* lse_rows) {
  using Consumer = FwdConsumer<Elem, kHeadDim, kRowTiles>;
  using Tile = typename Consumer::Tile;
  const int lane = c.lane();
  const int row0 = c.warp_row0();
  float inv_sum[Consumer::kRowSlots], lse[Consumer::kRowSlots];
#pragma unroll
  for (int r = 0; r < Consumer::kRowSlots; ++r) {
    float sum = c.row_sum(r);
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    inv_sum[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
    lse[r] = sum > 0.0f ? c.row_max(r) + log2f(sum) : kEmptyRowLse;
  }

#pragma unroll
  for (int t = 0; t < Consumer::kDimTiles; ++t) {
#pragma unroll
    for (int r = 0; r < Consumer::kRowSlots; ++r) {
      const int m = r / 2, h = r % 2;
      const int row = row0 + lane / 4 + 8 * r;
      const int col = 2 * (lane % 4);
      *reinterpret_cast<std::uint32_t*>(stage + Tile::offset(row, t) + col) =
          ElemTraits<Elem>::pack(c.o()[m][t][2 * h] * inv_sum[r], c.o()[m][t][2 * h + 1] * inv_sum[r]);
    }
  }
  __syncwarp();
#pragma unroll
  for (int i = lane; i < Consumer::kWarpRows * Tile::kChunks; i += 32) {
    const int row = row0 + i / Tile::kChunks;
    const int chunk = i % Tile::kChunks;
    *reinterpret_cast<uint4*>(out_rows + row * out_row_stride + chunk * 8) =
        *reinterpret_cast<const uint4*>(stage + Tile::offset(row, chunk));
  }
  if (lse_rows != nullptr && lane % 4 == 0) {
#pragma unroll
    for (int r = 0; r < Consumer::kRowSlots; ++r) lse_rows[row0 + lane / 4 + 8 * r] = lse[r];
  }
}

}  // namespace vsa::cuda::sm80
