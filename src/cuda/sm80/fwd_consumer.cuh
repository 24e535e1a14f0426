// Consumer side of the portable forward kernel: one warp owns 16 query rows.
// S = Q·Kᵀ and O += P·V on mma.sync m16n8k16; online softmax in exp2 with the
// scale·log2(e) factor folded into one FMA per score.
//
// Fragment bookkeeping (m16n8 accumulators): lane l holds rows g = l/4 and
// g + 8, columns 2·(l%4) and 2·(l%4)+1 of each 8-column tile; e = 0,1 are
// row g, e = 2,3 row g + 8.
#pragma once

#include <cstdint>

#include "cuda/common/numeric.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/sm80/fwd_producer.cuh"

namespace vsa::cuda::sm80 {

template <class Elem, int kHeadDim>
class FwdConsumer {
 public:
  static constexpr int kKeyTiles = kTileRows / 8;  // 8-key column tiles of S
  static constexpr int kDimTiles = kHeadDim / 8;   // 8-wide column tiles of O
  using Tile = SmemTile<Elem, kHeadDim>;
  using Scores = float[kKeyTiles][4];

  __device__ explicit FwdConsumer(int warp) : warp_row0_(warp * 16), lane_(threadIdx.x % 32) {
#pragma unroll
    for (int t = 0; t < kDimTiles; ++t) o_[t][0] = o_[t][1] = o_[t][2] = o_[t][3] = 0.0f;
    row_max_[0] = row_max_[1] = -INFINITY;
    row_sum_[0] = row_sum_[1] = 0.0f;
  }

  // Q stays in registers for the whole KV loop: it is reused by every tile.
  __device__ void load_q(const Elem* sq) {
    const int row = warp_row0_ + (lane_ % 8) + ((lane_ / 8) % 2) * 8;
#pragma unroll
    for (int kk = 0; kk < kQSteps; ++kk)
      ptx::ldmatrix_x4(q_[kk], ptx::smem_addr(sq + Tile::offset(row, 2 * kk + lane_ / 16)));
  }

  __device__ void scores(const Elem* sk, Scores& s) const {
#pragma unroll
    for (int t = 0; t < kKeyTiles; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.0f;
    const int key = (lane_ % 8) + (lane_ / 16) * 8;
#pragma unroll
    for (int kk = 0; kk < kQSteps; ++kk) {
#pragma unroll
      for (int pair = 0; pair < kKeyTiles / 2; ++pair) {
        std::uint32_t b[4];
        ptx::ldmatrix_x4(b, ptx::smem_addr(sk + Tile::offset(pair * 16 + key, 2 * kk + (lane_ / 8) % 2)));
        ptx::mma_16x8x16<ElemTraits<Elem>::kIsBf16>(s[2 * pair], q_[kk], b[0], b[1]);
        ptx::mma_16x8x16<ElemTraits<Elem>::kIsBf16>(s[2 * pair + 1], q_[kk], b[2], b[3]);
      }
    }
  }

  // Keys at tile offset >= valid do not exist for this block (vbs).
  __device__ void mask_keys(Scores& s, int valid) const {
#pragma unroll
    for (int t = 0; t < kKeyTiles; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (t * 8 + 2 * (lane_ % 4) + (e & 1) >= valid) s[t][e] = -INFINITY;
  }

  // Online softmax: s becomes P = exp2(s·scale·log2e − running max); O and the
  // partial row sums are rescaled when the max grows. Every tile has key 0
  // valid, so the running max is finite after the first tile (no inf − inf).
  __device__ void softmax(Scores& s, float scale_log2) {
    float new_max[2];
    bool grew = false;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int t = 0; t < kKeyTiles; ++t)
        tile_max = fmaxf(tile_max, fmaxf(s[t][2 * r], s[t][2 * r + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      new_max[r] = fmaxf(row_max_[r], tile_max * scale_log2);
      grew |= new_max[r] != row_max_[r];
    }
    // Past the first few tiles the running max rarely grows: when it grows on
    // no row of the warp, the rescale (a multiply per O accumulator) is skipped.
    if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float correction = ptx::exp2_fast(row_max_[r] - new_max[r]);
        row_sum_[r] *= correction;
#pragma unroll
        for (int t = 0; t < kDimTiles; ++t) {
          o_[t][2 * r] *= correction;
          o_[t][2 * r + 1] *= correction;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max_[r] = new_max[r];
      // Row sums stay per-lane partials until the epilogue: the correction
      // factor is the same on the four lanes of a row, so partials scale alike.
      float sum = 0.0f;
#pragma unroll
      for (int t = 0; t < kKeyTiles; ++t) {
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          s[t][e] = ptx::exp2_fast(fmaf(s[t][e], scale_log2, -new_max[r]));
          sum += s[t][e];
        }
      }
      row_sum_[r] += sum;
    }
  }

  // O += P·V: the S accumulators of two adjacent key tiles form one A fragment.
  __device__ void accumulate_pv(const Scores& p, const Elem* sv) {
    const int key = (lane_ % 8) + ((lane_ / 8) % 2) * 8;
#pragma unroll
    for (int kk = 0; kk < kKeyTiles / 2; ++kk) {
      const std::uint32_t a[4] = {
          ElemTraits<Elem>::pack(p[2 * kk][0], p[2 * kk][1]),
          ElemTraits<Elem>::pack(p[2 * kk][2], p[2 * kk][3]),
          ElemTraits<Elem>::pack(p[2 * kk + 1][0], p[2 * kk + 1][1]),
          ElemTraits<Elem>::pack(p[2 * kk + 1][2], p[2 * kk + 1][3]),
      };
#pragma unroll
      for (int pair = 0; pair < kDimTiles / 2; ++pair) {
        std::uint32_t b[4];
        ptx::ldmatrix_x4_trans(b, ptx::smem_addr(sv + Tile::offset(kk * 16 + key, 2 * pair + lane_ / 16)));
        ptx::mma_16x8x16<ElemTraits<Elem>::kIsBf16>(o_[2 * pair], a, b[0], b[1]);
        ptx::mma_16x8x16<ElemTraits<Elem>::kIsBf16>(o_[2 * pair + 1], a, b[2], b[3]);
      }
    }
  }

  __device__ int warp_row0() const { return warp_row0_; }
  __device__ int lane() const { return lane_; }
  __device__ const float (&o() const)[kDimTiles][4] { return o_; }
  __device__ float row_max(int r) const { return row_max_[r]; }
  __device__ float row_sum(int r) const { return row_sum_[r]; }

 private:
  static constexpr int kQSteps = kHeadDim / 16;  // k-steps of S = Q·Kᵀ
  int warp_row0_, lane_;
  std::uint32_t q_[kQSteps][4];
  float o_[kDimTiles][4];
  float row_max_[2], row_sum_[2];
};

}  // namespace vsa::cuda::sm80
