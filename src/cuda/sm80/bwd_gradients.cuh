// The backward's elementwise step on one warp's 16 keys × 64 query rows of
// Sᵀ and dPᵀ (m16n8 accumulator fragments: rows are keys key0 + lane/4 and
// + 8, columns are query rows), shared by the portable and the Hopper kernel,
// whose warpgroup accumulators hold the same fragments per warp:
//
//   Pᵀ  = exp2(Sᵀ·scale·log2e − lse[row])
//   dSᵀ = Pᵀ ∘ (dPᵀ − delta[row])
//
// and the store of dSᵀ into the [64 keys][64 rows] shared tile that dQ = dS·K
// reads (16-byte chunks XOR-swizzled by row % 8: the sm80 tile of width 64,
// which is also the Hopper 128-byte-swizzled layout of a 64-wide tile).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/numeric.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/sm80/tile_producer.cuh"

namespace vsa::cuda::sm80 {

constexpr int kBwdRowTiles = kTileRows / 8;  // 8-row column groups of Sᵀ
using BwdScores = float[1][kBwdRowTiles][4];

// Keys at or past `valid` get Pᵀ = dSᵀ = 0 exactly (selected, not
// multiplied: their scores may be anything), so their dK and dV rows stay
// exactly zero and they add nothing to dQ. So do query rows (columns) at or
// past `real_rows`, padding rows (q_variable_block_sizes), whose lse and
// delta may be anything: they add nothing to dK and dV (their q and dO rows
// enter the products times 0, so must be finite) and nothing to dQ. A pair
// with every key and row real (most pairs: only the last tile of a block can
// be partial) takes a branch without the selects; the branch is uniform
// over the CTA.
__device__ __forceinline__ void scores_to_gradients(BwdScores& s, BwdScores& dp, const float* s_lse,
                                                    const float* s_delta, float scale_log2, int valid, int key0,
                                                    int lane, int real_rows = kTileRows) {
  const int key = key0 + lane / 4;
  const bool real_key[2] = {key < valid, key + 8 < valid};
  const auto step = [&](auto masked) {
#pragma unroll
    for (int t = 0; t < kBwdRowTiles; ++t) {
      const int col = 8 * t + 2 * (lane % 4);
      const bool real_row[2] = {col < real_rows, col + 1 < real_rows};
      const float2 lse = *reinterpret_cast<const float2*>(s_lse + col);
      const float2 delta = *reinterpret_cast<const float2*>(s_delta + col);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float row_lse = (e & 1) ? lse.y : lse.x;
        const float row_delta = (e & 1) ? delta.y : delta.x;
        const float p = ptx::exp2_fast(fmaf(s[0][t][e], scale_log2, -row_lse));
        if constexpr (decltype(masked)::value) {
          const bool real = real_key[e / 2] && real_row[e & 1];
          s[0][t][e] = real ? p : 0.0f;
          dp[0][t][e] = real ? p * (dp[0][t][e] - row_delta) : 0.0f;
        } else {
          s[0][t][e] = p;
          dp[0][t][e] = p * (dp[0][t][e] - row_delta);
        }
      }
    }
  };
  if (valid >= kTileRows && real_rows >= kTileRows)
    step(std::false_type{});
  else
    step(std::true_type{});
}

// The dQ pass's view of the same step: rows are the warp's query rows
// (16·warp + lane/4 and + 8, whose lse and delta the thread holds), columns
// are keys 8t + 2·(lane%4) (+1) of the tile; keys at or past `valid` get
// P = dS = 0.
__device__ __forceinline__ void query_scores_to_gradients(BwdScores& s, BwdScores& dp, const float (&lse)[2],
                                                          const float (&delta)[2], float scale_log2, int valid,
                                                          int lane) {
#pragma unroll
  for (int t = 0; t < kBwdRowTiles; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const bool real = 8 * t + 2 * (lane % 4) + (e & 1) < valid;
      const float p = ptx::exp2_fast(fmaf(s[0][t][e], scale_log2, -lse[e / 2]));
      s[0][t][e] = real ? p : 0.0f;
      dp[0][t][e] = real ? p * (dp[0][t][e] - delta[e / 2]) : 0.0f;
    }
  }
}

// The tile is 128-byte aligned and its rows are 128 bytes, so chunk t of a row (at t ^ row % 8)
// is the row's chunk-0 address XOR 16·t, and row key + 8 (the same row % 8) is 1024 bytes on.
// kXorChunks takes the stores' addresses that way, one address register and eight XORs for the
// thread's sixteen stores: 21 instructions fewer per pair in the portable key pass. The Hopper
// key pass computes each store's offset from its row and chunk instead: with the XOR form
// ptxas allocated it 24 instructions more per pair, and it ran 0.7-1.9 % slower (2026-12-02).
template <class Elem, bool kXorChunks>
__device__ __forceinline__ void store_ds_rows(Elem* sds, const BwdScores& ds, int key0, int lane) {
  using DsTile = SmemTile<Elem, kTileRows>;
  constexpr int kElemBytes = static_cast<int>(sizeof(Elem));
  const int key = key0 + lane / 4;
  const std::uint32_t row = ptx::smem_addr(sds + DsTile::offset(key, 0) + 2 * (lane % 4));
#pragma unroll
  for (int t = 0; t < kBwdRowTiles; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const std::uint32_t pair = ElemTraits<Elem>::pack(ds[0][t][2 * h], ds[0][t][2 * h + 1]);
      if constexpr (kXorChunks)
        ptx::st_shared_b32((row ^ (t << 4)) + h * 8 * kTileRows * kElemBytes, pair);
      else
        *reinterpret_cast<std::uint32_t*>(sds + DsTile::offset(key + 8 * h, t) + 2 * (lane % 4)) = pair;
    }
}

}  // namespace vsa::cuda::sm80
