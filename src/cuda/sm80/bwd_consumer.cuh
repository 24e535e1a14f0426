// Consumer side of the portable backward kernel. The CTA owns 64 keys and
// its four warps form a 2 × 2 grid over each 64 × 64 pair, FA2's
// arrangement: warp w computes Sᵀ and dPᵀ for keys 32·(w/2).. × query rows
// 32·(w%2).., and keeps dK and dV for the same 32 keys × half of D (columns
// (D/2)·(w%2)..) in registers across every query tile that attends to them.
// Per 64-row query tile (Q, dO, lse, delta in shared memory):
//
//   Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ          the warp's 32 keys × 32 query rows
//   Pᵀ = exp2(Sᵀ·scale·log2e − lse)   the forward's probabilities, rebuilt
//   dSᵀ = Pᵀ ∘ (dPᵀ − delta)          both stored into shared tiles
//   dV += Pᵀ·dO, dK += dSᵀ·Q         the warp's keys × D/2, over all 64 rows
//   dQ += dS·K                         every warp takes D/4 columns of the 64
//                                      rows and adds them to the fp32
//                                      accumulator
//
// A warp's square tiles read 20 % fewer operand bytes out of shared memory
// per product than 16 keys × 64 rows (each Q and dO row is read by two warps,
// not four), at the price of staging Pᵀ and a barrier before dV and dK.
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
  static constexpr int kWarpKeys = 32;
  static constexpr int kWarpRows = 32;
  static constexpr int kKeyTiles = kWarpKeys / 16;
  static constexpr int kGradTiles = kHeadDim / 16;  // 8-column tiles of the warp's half of D
  using Scores = KeyRowScores<kKeyTiles, kWarpRows / 8>;  // the warp's 32 keys × 32 query rows
  using KeyGrad = float[kKeyTiles][kGradTiles][4];       // the warp's 32 keys × D/2

  __device__ explicit BwdConsumer(int warp)
      : warp_(warp),
        lane_(static_cast<int>(threadIdx.x % 32)),
        key0_(kWarpKeys * (warp / 2)),
        row0_(kWarpRows * (warp % 2)),
        col_tile0_(kGradTiles * (warp % 2)) {
#pragma unroll
    for (int m = 0; m < kKeyTiles; ++m)
#pragma unroll
      for (int t = 0; t < kGradTiles; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) dk_[m][t][e] = dv_[m][t][e] = 0.0f;
  }

  // s = Sᵀ = K·Qᵀ and dp = dPᵀ = V·dOᵀ for the warp's keys and rows.
  __device__ void scores(const Elem* sk, const Elem* sv, const Elem* sq, const Elem* sdo, Scores& s,
                         Scores& dp) const {
    warp_scores<Elem, kHeadDim>(sk, key0_, sq + row0_ * kHeadDim, s, lane_);
    warp_scores<Elem, kHeadDim>(sv, key0_, sdo + row0_ * kHeadDim, dp, lane_);
  }

  // s becomes Pᵀ, dp becomes dSᵀ (bwd_gradients.cuh).
  __device__ void gradients(Scores& s, Scores& dp, const float* s_lse, const float* s_delta, float scale_log2,
                            int valid, int real_rows) const {
    scores_to_gradients(s, dp, s_lse, s_delta, scale_log2, valid, key0_, row0_, lane_, real_rows);
  }

  // Pᵀ and dSᵀ into their [64 keys][64 rows] tiles, for dV, dK and dQ.
  __device__ void store(Elem* sp, Elem* sds, const Scores& p, const Scores& ds) const {
    store_key_rows<Elem, true>(sp, p, key0_, row0_, lane_);
    store_key_rows<Elem, true>(sds, ds, key0_, row0_, lane_);
  }

  // The stored-dS path: the chunks of the dSᵀ tile this warp wrote (its 32 keys' rows, its 32
  // query rows: four 16-byte chunks of each) copied to the same place of the tile's image at
  // `tile`, a lane per key row (the warp's own stores: a warp barrier, not a CTA one).
  __device__ void copy_ds_rows(const Elem* sds, unsigned char* tile) const {
    using KeyRowTile = SmemTile<Elem, kTileRows>;
    __syncwarp();
    const int key = key0_ + lane_;
#pragma unroll
    for (int c = 0; c < kWarpRows / 8; ++c) {
      const int offset = KeyRowTile::offset(key, row0_ / 8 + c);
      *reinterpret_cast<uint4*>(tile + offset * static_cast<int>(sizeof(Elem))) =
          *reinterpret_cast<const uint4*>(sds + offset);
    }
  }

  // The rows of Pᵀ and dSᵀ this warp's dV and dK read (its 32 keys) come from this warp and
  // the one beside it (the same keys, the other 32 query rows): a barrier of those two warps.
  __device__ void sync_key_rows() const { ptx::named_barrier_sync(1 + warp_ / 2, 64); }

  // dV += Pᵀ·dO, dK += dSᵀ·Q over the tile's 64 rows (dK's softmax scale is applied once, at
  // the end), once every warp's part of Pᵀ and dSᵀ is stored.
  __device__ void accumulate(const Elem* sp, const Elem* sds, const Elem* sq, const Elem* sdo) {
    warp_accumulate_shared<Elem, kTileRows, kHeadDim>(dv_, sp, key0_, sdo, col_tile0_, lane_);
    warp_accumulate_shared<Elem, kTileRows, kHeadDim>(dk_, sds, key0_, sq, col_tile0_, lane_);
  }

  // dQ(64 rows, this warp's D/4 columns) = dS·K, added into the tile's fp32
  // accumulator: the 16-row tiles that hold one of the first real_rows rows
  // (the rest are padding rows, whose dQ is 0). The A operand is dS read
  // transposed out of the dSᵀ tile. One row tile at a time, its reductions
  // issued before the next one's products: they read other registers than
  // those the products write, so no instruction waits for a reduction to
  // read its operands, and the warp's K columns stay in registers throughout.
  __device__ void add_dq(const Elem* sds, const Elem* sk, float* dq_tile, int real_rows) const {
    constexpr int kColTiles = kHeadDim / 32;  // 8-column groups per warp
    constexpr int kDepthTiles = kTileRows / 16;
    const SwizzledReader<Elem, kTileRows> ds_rows(sds, (lane_ % 8) + (lane_ / 16) * 8, (lane_ / 8) % 2);
    const SwizzledReader<Elem, kHeadDim> k_rows(sk, (lane_ % 8) + ((lane_ / 8) % 2) * 8, lane_ / 16);
    const int first_group = warp_ * kColTiles;
    std::uint32_t b[kDepthTiles][kColTiles / 2][4];
#pragma unroll
    for (int kk = 0; kk < kDepthTiles; ++kk)
#pragma unroll
      for (int pair = 0; pair < kColTiles / 2; ++pair)
        ptx::ldmatrix_x4_trans(b[kk][pair], k_rows.at(16 * kk, first_group + 2 * pair));
    // Row tile m of a warp holds what thread 32·m + lane of a warpgroup would. Every quad's offset
    // is the first one's plus a constant, so a row tile's four reductions share one address.
    float* const quads = dq_tile + dq_quad_offset<kHeadDim>(first_group, lane_);
#pragma unroll
    for (int m = 0; m < kTileRows / 16; ++m) {
      if (16 * m >= real_rows) break;
      float acc[kColTiles][4];
#pragma unroll
      for (int t = 0; t < kColTiles; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kDepthTiles; ++kk) {
        std::uint32_t a[4];
        ptx::ldmatrix_x4_trans(a, ds_rows.at(16 * kk, 2 * m));
#pragma unroll
        for (int pair = 0; pair < kColTiles / 2; ++pair) {
          ptx::mma_16x8x16<ElemTraits<Elem>::kIsBf16>(acc[2 * pair], a, b[kk][pair][0], b[kk][pair][1]);
          ptx::mma_16x8x16<ElemTraits<Elem>::kIsBf16>(acc[2 * pair + 1], a, b[kk][pair][2], b[kk][pair][3]);
        }
      }
#pragma unroll
      for (int t = 0; t < kColTiles; ++t)
        ptx::red_add_f32x4(quads + (dq_quad_offset<kHeadDim>(t, 32 * m) - dq_quad_offset<kHeadDim>(0, 0)), acc[t][0],
                           acc[t][1], acc[t][2], acc[t][3]);
    }
  }

  __device__ int lane() const { return lane_; }
  __device__ int key0() const { return key0_; }
  __device__ int col_tile0() const { return col_tile0_; }
  __device__ const KeyGrad& dk() const { return dk_; }
  __device__ const KeyGrad& dv() const { return dv_; }

 private:
  int warp_, lane_;
  int key0_, row0_, col_tile0_;  // the warp's first key, query row and 8-column tile of D
  KeyGrad dk_, dv_;
};

}  // namespace vsa::cuda::sm80
