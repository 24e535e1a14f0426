// Epilogues of the backward kernels: a warp's part of the dK, dV or dq tile,
// written once, staged through shared memory so the global stores are
// 16-byte and coalesced.
#pragma once

#include <cstdint>

#include "cuda/common/mean_grad_rows.cuh"
#include "cuda/common/numeric.cuh"
#include "cuda/sm80/bwd_consumer.cuh"

namespace vsa::cuda::sm80 {

// Both portable backward passes run four warps.
constexpr int kBwdThreads = 128;

// A warp's part of a [64][D] result tile, written once: rows row0.. (16 per
// row tile) × columns 8·col_tile0.. of the accumulators `acc` (m16n8
// fragments), times `factor`, staged through the swizzled tile `stage` so
// the global stores are 16-byte and coalesced. That part of `stage` belongs
// to the warp alone, so no CTA barrier is needed between staging and
// storing. Rows of the tile from `real_rows` on are written as exact zeros
// (selected as they are copied out: the dQ pass's padding query rows, whose
// sums may be anything; rows never mix in its products, so this is the only
// place they need). `add` is the block-mean gradient added before rounding
// (none by default).
template <class Elem, int kHeadDim, int kRowTiles, int kColTiles>
__device__ void write_warp_tile(const float (&acc)[kRowTiles][kColTiles][4], float factor, int row0, int col_tile0,
                                int lane, Elem* stage, Elem* out_rows, std::int64_t out_row_stride,
                                int real_rows = kTileRows, const MeanGradRows& add = {}) {
  using Tile = SmemTile<Elem, kHeadDim>;
#pragma unroll
  for (int m = 0; m < kRowTiles; ++m)
#pragma unroll
    for (int t = 0; t < kColTiles; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + lane / 4 + 16 * m + 8 * h, col = 8 * (col_tile0 + t) + 2 * (lane % 4);
        *reinterpret_cast<std::uint32_t*>(stage + Tile::offset(row, col_tile0 + t) + 2 * (lane % 4)) =
            ElemTraits<Elem>::pack(add.add_to(acc[m][t][2 * h] * factor, row, col),
                                   add.add_to(acc[m][t][2 * h + 1] * factor, row, col + 1));
      }
  __syncwarp();
#pragma unroll
  for (int i = lane; i < 16 * kRowTiles * kColTiles; i += 32) {
    const int row = row0 + i / kColTiles;
    const int chunk = col_tile0 + i % kColTiles;
    *reinterpret_cast<uint4*>(out_rows + row * out_row_stride + chunk * 8) =
        row < real_rows ? *reinterpret_cast<const uint4*>(stage + Tile::offset(row, chunk)) : make_uint4(0, 0, 0, 0);
  }
}

// The dQ passes' and the Hopper key pass's warps: rows 16w..16w+15, all of D.
template <class Elem, int kHeadDim>
__device__ void write_warp_rows(const float (&acc)[1][kHeadDim / 8][4], float factor, int warp, int lane,
                                Elem* stage, Elem* out_rows, std::int64_t out_row_stride, int real_rows = kTileRows,
                                const MeanGradRows& add = {}) {
  write_warp_tile<Elem, kHeadDim>(acc, factor, 16 * warp, 0, lane, stage, out_rows, out_row_stride, real_rows, add);
}

// The portable key pass: each warp's 32 keys × D/2 of dK (times the softmax
// scale) and dV. Keys past the block's valid count hold exact zeros.
template <class Elem, int kHeadDim>
__device__ void write_key_grads(const BwdConsumer<Elem, kHeadDim>& c, float scale, Elem* stage_k, Elem* stage_v,
                                Elem* dk_rows, std::int64_t dk_row_stride, Elem* dv_rows, std::int64_t dv_row_stride,
                                const MeanGradRows& add_k, const MeanGradRows& add_v) {
  write_warp_tile<Elem, kHeadDim>(c.dk(), scale, c.key0(), c.col_tile0(), c.lane(), stage_k, dk_rows, dk_row_stride,
                                  kTileRows, add_k);
  write_warp_tile<Elem, kHeadDim>(c.dv(), 1.0f, c.key0(), c.col_tile0(), c.lane(), stage_v, dv_rows, dv_row_stride,
                                  kTileRows, add_v);
}

}  // namespace vsa::cuda::sm80
