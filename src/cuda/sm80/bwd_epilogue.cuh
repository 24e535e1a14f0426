// Epilogue of the portable backward kernel: each warp writes its 16 keys' dK
// (times the softmax scale) and dV rows once, staged through shared memory so
// the global stores are 16-byte and coalesced. Keys past the block's valid
// count hold exact zeros.
#pragma once

#include <cstdint>

#include "cuda/common/mean_grad_rows.cuh"
#include "cuda/common/numeric.cuh"
#include "cuda/sm80/bwd_consumer.cuh"

namespace vsa::cuda::sm80 {

// Both backward passes run four warps of 16 rows: keys in the key pass,
// queries in the dQ pass.
constexpr int kBwdThreads = 128;

// Rows 16w..16w+15 of `stage` (a [64][D] swizzled tile) belong to warp w
// alone, so no CTA barrier is needed between staging and storing. Rows of
// the tile from `real_rows` on are written as exact zeros (selected as they
// are copied out: the dQ pass's padding query rows, whose sums may be
// anything; rows never mix in its products, so this is the only place they
// need). `add` is the block-mean gradient added before rounding (none by
// default).
template <class Elem, int kHeadDim>
__device__ void write_warp_rows(const float (&acc)[1][kHeadDim / 8][4], float factor, int warp, int lane,
                                Elem* stage, Elem* out_rows, std::int64_t out_row_stride, int real_rows = kTileRows,
                                const MeanGradRows& add = {}) {
  using Tile = SmemTile<Elem, kHeadDim>;
  const int row0 = 16 * warp;
#pragma unroll
  for (int t = 0; t < kHeadDim / 8; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + lane / 4 + 8 * h, col = 8 * t + 2 * (lane % 4);
      *reinterpret_cast<std::uint32_t*>(stage + Tile::offset(row, t) + 2 * (lane % 4)) =
          ElemTraits<Elem>::pack(add.add_to(acc[0][t][2 * h] * factor, row, col),
                                 add.add_to(acc[0][t][2 * h + 1] * factor, row, col + 1));
    }
  __syncwarp();
#pragma unroll
  for (int i = lane; i < 16 * Tile::kChunks; i += 32) {
    const int row = row0 + i / Tile::kChunks;
    const int chunk = i % Tile::kChunks;
    *reinterpret_cast<uint4*>(out_rows + row * out_row_stride + chunk * 8) =
        row < real_rows ? *reinterpret_cast<const uint4*>(stage + Tile::offset(row, chunk)) : make_uint4(0, 0, 0, 0);
  }
}

template <class Elem, int kHeadDim>
__device__ void write_key_grads(const BwdConsumer<Elem, kHeadDim>& c, float scale, Elem* stage_k, Elem* stage_v,
                                Elem* dk_rows, std::int64_t dk_row_stride, Elem* dv_rows, std::int64_t dv_row_stride,
                                const MeanGradRows& add_k, const MeanGradRows& add_v) {
  write_warp_rows<Elem, kHeadDim>(c.dk(), scale, c.warp(), c.lane(), stage_k, dk_rows, dk_row_stride, kTileRows,
                                  add_k);
  write_warp_rows<Elem, kHeadDim>(c.dv(), 1.0f, c.warp(), c.lane(), stage_v, dv_rows, dv_row_stride, kTileRows,
                                  add_v);
}

}  // namespace vsa::cuda::sm80
