// Consumer side of the portable backward kernel. The CTA owns 64 keys; warp w
// owns keys 16w..16w+15 and keeps their dK and dV in registers across every
// query tile that attends to them. Per 64-row query tile (Q, dO, lse, delta
// in shared memory):
//
//   Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ          the warp's 16 keys × 64 query rows
//   Pᵀ = exp2(Sᵀ·scale·log2e − lse)   the forward's probabilities, rebuilt
//   dSᵀ = Pᵀ ∘ (dPᵀ − delta)
//   dV += Pᵀ·dO, dK += dSᵀ·Q         the warp's keys, in registers
//   dQ += dS·K                         through a shared dSᵀ tile: every warp
//                                      takes D/4 columns of the 64 rows and
//                                      adds them to the fp32 accumulator
#pragma once

#include <cstdint>

#include "cuda/common/dq_accum.cuh"
#include "cuda/common/numeric.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/sm80/bwd_gradients.cuh"
#include "cuda/sm80/warp_mma.cuh"

namespace vsa::cuda::sm80 {

template <class Elem, int kHeadDim>
class BwdConsumer {
 public:
  static constexpr int kWarpKeys = 16;
  static constexpr int kDimTiles = kHeadDim / 8;
  using Scores = BwdScores;  // the warp's 16 keys × 64 query rows
  using KeyGrad = float[1][kDimTiles][4];  // the warp's 16 keys × D

  __device__ explicit BwdConsumer(int warp) : warp_(warp), lane_(static_cast<int>(threadIdx.x % 32)) {
#pragma unroll
    for (int t = 0; t < kDimTiles; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk_[0][t][e] = dv_[0][t][e] = 0.0f;
  }

  // s = Sᵀ = K·Qᵀ and dp = dPᵀ = V·dOᵀ for the warp's keys.
  __device__ void scores(const Elem* sk, const Elem* sv, const Elem* sq, const Elem* sdo, Scores& s,
                         Scores& dp) const {
    warp_scores<Elem, kHeadDim>(sk, kWarpKeys * warp_, sq, s, lane_);
    warp_scores<Elem, kHeadDim>(sv, kWarpKeys * warp_, sdo, dp, lane_);
  }

  // s becomes Pᵀ, dp becomes dSᵀ (bwd_gradients.cuh).
  __device__ void gradients(Scores& s, Scores& dp, const float* s_lse, const float* s_delta, float scale_log2,
                            int valid, int real_rows) const {
    scores_to_gradients(s, dp, s_lse, s_delta, scale_log2, valid, kWarpKeys * warp_, lane_, real_rows);
  }

  // dV += Pᵀ·dO, dK += dSᵀ·Q (dK's softmax scale is applied once, at the end).
  __device__ void accumulate(const Elem* sq, const Elem* sdo, const Scores& p, const Scores& ds) {
    warp_accumulate<Elem, kHeadDim>(dv_, p, sdo, lane_);
    warp_accumulate<Elem, kHeadDim>(dk_, ds, sq, lane_);
  }

  __device__ void store_ds(Elem* sds, const Scores& ds) const {
    store_ds_rows<Elem, true>(sds, ds, kWarpKeys * warp_, lane_);
  }

  // dQ(64 rows, this warp's D/4 columns) = dS·K, added into the tile's fp32
  // accumulator: the 16-row tiles that hold one of the first real_rows rows
  // (the rest are padding rows, whose dQ is 0). The A operand is dS read
  // transposed out of the dSᵀ tile.
  __device__ void add_dq(const Elem* sds, const Elem* sk, float* dq_tile, int real_rows) const {
    constexpr int kColTiles = kDimTiles / 4;  // 8-column groups per warp
    float acc[kTileRows / 16][kColTiles][4];
#pragma unroll
    for (int m = 0; m < kTileRows / 16; ++m)
#pragma unroll
      for (int t = 0; t < kColTiles; ++t) acc[m][t][0] = acc[m][t][1] = acc[m][t][2] = acc[m][t][3] = 0.0f;
    const SwizzledReader<Elem, kTileRows> ds_rows(sds, (lane_ % 8) + (lane_ / 16) * 8, (lane_ / 8) % 2);
    const SwizzledReader<Elem, kHeadDim> k_rows(sk, (lane_ % 8) + ((lane_ / 8) % 2) * 8, lane_ / 16);
    const int first_group = warp_ * kColTiles;
#pragma unroll
    for (int kk = 0; kk < kTileRows / 16; ++kk) {
      std::uint32_t a[kTileRows / 16][4];
#pragma unroll
      for (int m = 0; m < kTileRows / 16; ++m) ptx::ldmatrix_x4_trans(a[m], ds_rows.at(16 * kk, 2 * m));
#pragma unroll
      for (int pair = 0; pair < kColTiles / 2; ++pair) {
        std::uint32_t b[4];
        ptx::ldmatrix_x4_trans(b, k_rows.at(16 * kk, first_group + 2 * pair));
#pragma unroll
        for (int m = 0; m < kTileRows / 16; ++m) {
          ptx::mma_16x8x16<ElemTraits<Elem>::kIsBf16>(acc[m][2 * pair], a[m], b[0], b[1]);
          ptx::mma_16x8x16<ElemTraits<Elem>::kIsBf16>(acc[m][2 * pair + 1], a[m], b[2], b[3]);
        }
      }
    }
    // Row tile m of a warp holds what thread 32·m + lane of a warpgroup would. Every quad's offset
    // is the first one's plus a constant, so a row tile's four reductions share one address.
    float* const quads = dq_tile + dq_quad_offset<kHeadDim>(first_group, lane_);
#pragma unroll
    for (int m = 0; m < kTileRows / 16; ++m)
      if (16 * m < real_rows)
#pragma unroll
        for (int t = 0; t < kColTiles; ++t)
          ptx::red_add_f32x4(quads + (dq_quad_offset<kHeadDim>(t, 32 * m) - dq_quad_offset<kHeadDim>(0, 0)),
                             acc[m][t][0], acc[m][t][1], acc[m][t][2], acc[m][t][3]);
  }

  __device__ int warp() const { return warp_; }
  __device__ int lane() const { return lane_; }
  __device__ const KeyGrad& dk() const { return dk_; }
  __device__ const KeyGrad& dv() const { return dv_; }

 private:
  int warp_, lane_;
  KeyGrad dk_, dv_;
};

}  // namespace vsa::cuda::sm80
