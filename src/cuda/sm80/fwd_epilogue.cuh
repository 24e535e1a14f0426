// Epilogue of the forward kernels (the portable one and both Hopper ones):
// normalize O by the row sums, write it through shared memory as 16-byte
// coalesced stores, and write the base-2 LSE. Rows that saw no key get O = 0
// and lse = kEmptyRowLse. With the fused gate combine (CtaOutputs::coarse),
// each staged chunk of 8 rounded outputs becomes fine + coarse · gate on its
// way out: the arithmetic of the combine kernel (layer/gate_combine.cu), so
// the same bits, without a second pass over out.
#pragma once

#include <cstdint>

#include "core/layer_arithmetic.hpp"
#include "cuda/common/numeric.cuh"
#include "cuda/common/query_scheduler.cuh"
#include "cuda/layer/vector_io.cuh"
#include "cuda/sm80/fwd_consumer.cuh"
#include "vsa/attention.hpp"

namespace vsa::cuda::sm80 {

// Chunk `chunk` (8 elements) of staged output row `row` with the gate
// combine applied: the rounded attention, plus the CTA's coarse row times the
// row's gate (1 without a gate), rounded once more.
template <class Elem>
__device__ __forceinline__ void store_combined_chunk(const Elem* staged, const CtaOutputs<Elem>& dst, int row,
                                                     int chunk) {
  float fine[8], coarse[8], gate[8] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  layer::load8(staged, fine);
  layer::load8(dst.coarse + 8 * chunk, coarse);
  if (dst.gate != nullptr) layer::load8(dst.gate + row * dst.gate_row_stride + 8 * chunk, gate);
#pragma unroll
  for (int e = 0; e < 8; ++e) fine[e] = detail::combine_step(fine[e], coarse[e], gate[e]);
  layer::store8(dst.out + row * dst.out_row_stride + 8 * chunk, fine);
}

// `stage` is the CTA's shared Q tile: each warp stages its output rows over
// its own Q rows, which no other warp reads, so no CTA barrier is needed.
template <class Elem, int kHeadDim, int kRowTiles>
__device__ void write_output(const FwdConsumer<Elem, kHeadDim, kRowTiles>& c, Elem* stage,
                             const CtaOutputs<Elem>& dst) {
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
    if (dst.coarse != nullptr)
      store_combined_chunk(stage + Tile::offset(row, chunk), dst, row, chunk);
    else
      *reinterpret_cast<uint4*>(dst.out + row * dst.out_row_stride + chunk * 8) =
          *reinterpret_cast<const uint4*>(stage + Tile::offset(row, chunk));
  }
  if (dst.lse != nullptr && lane % 4 == 0) {
#pragma unroll
    for (int r = 0; r < Consumer::kRowSlots; ++r) dst.lse[row0 + lane / 4 + 8 * r] = lse[r];
  }
}

}  // namespace vsa::cuda::sm80
