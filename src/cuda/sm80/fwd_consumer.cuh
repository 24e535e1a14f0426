// Consumer side of the portable forward kernel: one warp owns 32 query rows
// (two m16 row tiles). S = Q·Kᵀ and O += P·V on mma.sync m16n8k16; online
// softmax in exp2 with the scale·log2(e) factor folded into one FMA per score.
//
// Why 32 rows: every K or V fragment read from shared memory by ldmatrix
// feeds both row tiles, which halves the shared-memory bytes per FLOP (the
// limit of a 16-row warp). Q is read from shared memory at each k-step
// instead of being held in registers: 32 rows of Q would cost 64 registers.
//
// Fragment bookkeeping: see warp_mma.cuh. Row slot r = 2·m + h names row
// tile m, half h.
#pragma once

#include <cstdint>

#include "cuda/common/numeric.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/sm80/warp_mma.cuh"

namespace vsa::cuda::sm80 {

// kRowTiles: m16 row tiles per warp (2 here; the sm_90 kernels, whose warps
// own 16 rows of a warpgroup's 64, use 1 and only the softmax and epilogue).
// kKeys: the keys of one score tile (64; the sm_90 kernel for 128-token
// blocks takes a whole block, 128, per step).
template <class Elem, int kHeadDim, int kRowTiles_ = 2, int kKeys = kTileRows>
class FwdConsumer {
 public:
  static constexpr int kRowTiles = kRowTiles_;       // m16 tiles per warp
  static constexpr int kWarpRows = 16 * kRowTiles;   // query rows per warp
  static constexpr int kRowSlots = 2 * kRowTiles;    // rows per lane
  static constexpr int kKeyTiles = kKeys / 8;        // 8-key column tiles of S
  static constexpr int kDimTiles = kHeadDim / 8;     // 8-wide column tiles of O
  using Tile = SmemTile<Elem, kHeadDim>;
  using Scores = float[kRowTiles][kKeyTiles][4];
  // The scores of fewer keys (kTiles 8-key tiles: the Hopper forward's tiles of partial blocks,
  // multiplied over their real keys' rows only); the steps below take either.
  template <int kTiles>
  using ScoresOf = float[kRowTiles][kTiles][4];

  __device__ explicit FwdConsumer(int warp) : warp_row0_(warp * kWarpRows), lane_(threadIdx.x % 32) {
#pragma unroll
    for (int m = 0; m < kRowTiles; ++m)
#pragma unroll
      for (int t = 0; t < kDimTiles; ++t) o_[m][t][0] = o_[m][t][1] = o_[m][t][2] = o_[m][t][3] = 0.0f;
#pragma unroll
    for (int r = 0; r < kRowSlots; ++r) {
      row_max_[r] = kNoKeyMax;
      row_sum_[r] = 0.0f;
    }
  }

  __device__ void scores(const Elem* sq, const Elem* sk, Scores& s) const {
    warp_scores<Elem, kHeadDim>(sq, warp_row0_, sk, s, lane_);
  }

  // Keys at tile offset >= valid do not exist for this block (vbs).
  template <int kTiles>
  __device__ void mask_keys(ScoresOf<kTiles>& s, int valid) const {
    mask_keys_where(s, [valid](int key) { return key >= valid; });
  }
  // Keys at tile offset < first do not exist (a tile whose real keys were
  // loaded into its last rows: sm90::request_key_tile).
  template <int kTiles>
  __device__ void mask_keys_before(ScoresOf<kTiles>& s, int first) const {
    mask_keys_where(s, [first](int key) { return key < first; });
  }

  // Online softmax: s becomes P = exp2(s·scale·log2e − running max); O and the
  // partial row sums are rescaled when the max moves (kMaxSlack).
  __device__ void softmax(Scores& s, float scale_log2) {
    float correction[kRowSlots];
    if (softmax_scores(s, scale_log2, correction)) rescale_o(correction);
  }

  // The softmax without touching O, for a kernel whose previous P·V is still
  // in flight: s becomes P and the row sums are rescaled; returns whether the
  // max moved on any row of the warp, and then the factors O must be
  // multiplied by once that P·V is done (rescale_o). A tile whose keys are
  // all masked (-inf) gives P = 0 and leaves the running max as it was.
  template <int kTiles>
  __device__ bool softmax_scores(ScoresOf<kTiles>& s, float scale_log2, float (&correction)[kRowSlots]) {
    // The running max moves only when the tile's exceeds it by more than
    // kMaxSlack (from kNoKeyMax: on the first tile with a real key). Whether
    // that happens on any row of the warp is decided from each lane's own
    // part of its rows, by one vote; the shuffles that combine a row's four
    // lanes run only then, off the path of the tiles where nothing moves.
    float new_max[kRowSlots];
    lane_row_maxima(s, new_max);
    bool moves = false;
#pragma unroll
    for (int r = 0; r < kRowSlots; ++r) moves |= new_max[r] * scale_log2 > row_max_[r] + kMaxSlack;
    const bool grew = __any_sync(0xffffffffu, moves);
    if (grew) combine_row_lanes(new_max);
#pragma unroll
    for (int r = 0; r < kRowSlots; ++r) {
      const float tile_max = new_max[r] * scale_log2;
      new_max[r] = grew && tile_max > row_max_[r] + kMaxSlack ? tile_max : row_max_[r];
    }
    float sum[kRowSlots];
#pragma unroll
    for (int r = 0; r < kRowSlots; ++r) {
      const int m = r / 2, h = r % 2;
      // With no key yet the shift is kNoKeyMax, finite: a masked score's
      // exp2(-inf + FLT_MAX) is 0.
      const float shift = new_max[r];
      sum[r] = 0.0f;
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          s[m][t][e] = ptx::exp2_fast(fmaf(s[m][t][e], scale_log2, -shift));
          sum[r] += s[m][t][e];
        }
      }
    }
    // With the slack the running max seldom moves past a row's first real
    // tile: when it moves on no row of the warp, the rescale (a multiply per O
    // accumulator) is skipped. The first real tile's correction,
    // exp2(kNoKeyMax − max), is 0, as O and the sums are.
    if (grew) {
#pragma unroll
      for (int r = 0; r < kRowSlots; ++r) {
        correction[r] = ptx::exp2_fast(row_max_[r] - new_max[r]);
        row_sum_[r] *= correction[r];
      }
    }
    // Row sums stay per-lane partials until the epilogue: the correction
    // factor is the same on the four lanes of a row, so partials scale alike.
#pragma unroll
    for (int r = 0; r < kRowSlots; ++r) {
      row_max_[r] = new_max[r];
      row_sum_[r] += sum[r];
    }
    return grew;
  }

  // How far (log2 units) a tile's row max may exceed the running max before
  // the max moves and O is rescaled. The softmax is exact for any slack (lse
  // = max + log2(sum) and O / sum do not depend on the max the exponentials
  // were taken against); the slack bounds P by 2^8, where bf16 and fp16 keep
  // their relative precision and the sums stay far from fp32's range. A max
  // that moved on every rise rescaled a warp's O (16 or 32 rows) on about
  // half the tiles of a 64-tile walk over normal scores (31 of 64, 47 of 192
  // in a simulation of 16 rows); with the slack, on the first real tile only,
  // unless a row's scores later rise by more than 8 (log2 units).
  static constexpr float kMaxSlack = 8.0f;
  // The running max of a row with no real key yet: finite, so that the
  // exponentials of an all-masked tile, exp2(-inf − kNoKeyMax), are 0.
  static constexpr float kNoKeyMax = -3.402823466e38f;  // -FLT_MAX

  __device__ void rescale_o(const float (&correction)[kRowSlots]) {
#pragma unroll
    for (int r = 0; r < kRowSlots; ++r) {
      const int m = r / 2, h = r % 2;
#pragma unroll
      for (int t = 0; t < kDimTiles; ++t) {
        o_[m][t][2 * h] *= correction[r];
        o_[m][t][2 * h + 1] *= correction[r];
      }
    }
  }

  // O += P·V.
  __device__ void accumulate_pv(const Scores& p, const Elem* sv) { warp_accumulate<Elem, kHeadDim>(o_, p, sv, lane_); }

  __device__ int warp_row0() const { return warp_row0_; }
  __device__ int lane() const { return lane_; }
  __device__ const float (&o() const)[kRowTiles][kDimTiles][4] { return o_; }
  __device__ float (&accumulators())[kRowTiles][kDimTiles][4] { return o_; }
  __device__ float row_max(int r) const { return row_max_[r]; }
  __device__ float row_sum(int r) const { return row_sum_[r]; }

 private:
  // The scores of the keys (tile offsets) for which `absent` holds become −∞.
  template <int kTiles, class Absent>
  __device__ void mask_keys_where(ScoresOf<kTiles>& s, Absent absent) const {
#pragma unroll
    for (int m = 0; m < kRowTiles; ++m)
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (absent(t * 8 + 2 * (lane_ % 4) + (e & 1))) s[m][t][e] = -INFINITY;
  }

  // Each row's max over this lane's scores of the tile: four running maxima
  // per row, each over every fourth key tile, then a tree of the four: a
  // quarter of a single chain's dependent steps, with four live partials per
  // row where a full tree keeps one per key tile. (Measured: no change in time
  // on the kernels that use it; fewer instructions.) Two tiles (16 keys) make
  // two chains.
  template <int kTiles>
  __device__ void lane_row_maxima(const ScoresOf<kTiles>& s, float (&row_max)[kRowSlots]) const {
    constexpr int kChains = kTiles < 4 ? kTiles : 4;
    static_assert(kTiles % kChains == 0 && kChains % 2 == 0, "whole chains, in pairs");
    float part[kRowSlots][kChains];
#pragma unroll
    for (int r = 0; r < kRowSlots; ++r)
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        const float pair = fmaxf(s[r / 2][t][2 * (r % 2)], s[r / 2][t][2 * (r % 2) + 1]);
        part[r][t % kChains] = t < kChains ? pair : fmaxf(part[r][t % kChains], pair);
      }
#pragma unroll
    for (int r = 0; r < kRowSlots; ++r) {
      if constexpr (kChains == 4)
        row_max[r] = fmaxf(fmaxf(part[r][0], part[r][1]), fmaxf(part[r][2], part[r][3]));
      else
        row_max[r] = fmaxf(part[r][0], part[r][1]);
    }
  }
  // The four lanes of each row combined, all rows' shuffles together.
  __device__ static void combine_row_lanes(float (&row_max)[kRowSlots]) {
#pragma unroll
    for (int lanes = 1; lanes < 4; lanes *= 2)
#pragma unroll
      for (int r = 0; r < kRowSlots; ++r) row_max[r] = fmaxf(row_max[r], __shfl_xor_sync(0xffffffffu, row_max[r], lanes));
  }

  int warp_row0_, lane_;
  float o_[kRowTiles][kDimTiles][4];
  float row_max_[kRowSlots], row_sum_[kRowSlots];
};

}  // namespace vsa::cuda::sm80
