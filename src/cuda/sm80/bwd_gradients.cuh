// The backward's elementwise step on a warp's fragments of Sᵀ and dPᵀ (m16n8
// accumulator fragments: rows are keys, columns are query rows), shared by
// the portable and the Hopper kernel:
//
//   Pᵀ  = exp2(Sᵀ·scale·log2e − lse[row])
//   dSᵀ = Pᵀ ∘ (dPᵀ − delta[row])
//
// and the store of such fragments into a [64 keys][64 rows] shared tile
// (16-byte chunks XOR-swizzled by row % 8: the sm80 tile of width 64, which
// is also the Hopper 128-byte-swizzled layout of a 64-wide tile). The Hopper
// key pass's warps hold 16 keys × 64 rows (a warp of a warpgroup's
// accumulators), the portable key pass's 32 keys × 32 rows.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/numeric.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/sm80/tile_producer.cuh"

namespace vsa::cuda::sm80 {

// A warp's fragments: key tile m holds keys key0 + 16m + lane/4 (and + 8),
// column tile t query rows row0 + 8t + 2·(lane%4) (and + 1).
template <int kKeyTiles, int kRowTiles>
using KeyRowScores = float[kKeyTiles][kRowTiles][4];

// 16 rows × all 64 columns: the Hopper key pass's warps, and both dQ passes'
// (whose rows are query rows and columns keys).
constexpr int kBwdRowTiles = kTileRows / 8;
using BwdScores = KeyRowScores<1, kBwdRowTiles>;

// Keys at or past `valid` get Pᵀ = dSᵀ = 0 exactly (selected, not
// multiplied: their scores may be anything), so their dK and dV rows stay
// exactly zero and they add nothing to dQ. So do query rows (columns) at or
// past `real_rows`, padding rows (q_variable_block_sizes), whose lse and
// delta may be anything: they add nothing to dK and dV (their q and dO rows
// enter the products times 0, so must be finite) and nothing to dQ. A pair
// with every key and row real (most pairs: only the last tile of a block can
// be partial) takes a branch without the selects; the branch is uniform
// over the CTA.
template <int kKeyTiles, int kRowTiles>
__device__ __forceinline__ void scores_to_gradients(KeyRowScores<kKeyTiles, kRowTiles>& s,
                                                    KeyRowScores<kKeyTiles, kRowTiles>& dp, const float* s_lse,
                                                    const float* s_delta, float scale_log2, int valid, int key0,
                                                    int row0, int lane, int real_rows = kTileRows) {
  const int key = key0 + lane / 4;
  bool real_key[kKeyTiles][2];
#pragma unroll
  for (int m = 0; m < kKeyTiles; ++m) {
    real_key[m][0] = key + 16 * m < valid;
    real_key[m][1] = key + 16 * m + 8 < valid;
  }
  const auto step = [&](auto masked) {
#pragma unroll
    for (int t = 0; t < kRowTiles; ++t) {
      const int col = row0 + 8 * t + 2 * (lane % 4);
      const bool real_row[2] = {col < real_rows, col + 1 < real_rows};
      const float2 lse = *reinterpret_cast<const float2*>(s_lse + col);
      const float2 delta = *reinterpret_cast<const float2*>(s_delta + col);
#pragma unroll
      for (int m = 0; m < kKeyTiles; ++m)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float row_lse = (e & 1) ? lse.y : lse.x;
          const float row_delta = (e & 1) ? delta.y : delta.x;
          const float p = ptx::exp2_fast(fmaf(s[m][t][e], scale_log2, -row_lse));
          if constexpr (decltype(masked)::value) {
            const bool real = real_key[m][e / 2] && real_row[e & 1];
            s[m][t][e] = real ? p : 0.0f;
            dp[m][t][e] = real ? p * (dp[m][t][e] - row_delta) : 0.0f;
          } else {
            s[m][t][e] = p;
            dp[m][t][e] = p * (dp[m][t][e] - row_delta);
          }
        }
    }
  };
  if (valid >= kTileRows && real_rows >= kTileRows)
    step(std::false_type{});
  else
    step(std::true_type{});
}

// A warp's fragments (Pᵀ or dSᵀ) into a [64 keys][64 rows] tile. The tile is
// 128-byte aligned and its rows are 128 bytes, so chunk c of a row (at c ^ row % 8)
// is the row's chunk-0 address XOR 16·c, and rows key + 8 and key + 16 (the same row % 8) are
// 1024 and 2048 bytes on. kXorChunks takes the stores' addresses that way, one address register
// and an XOR per chunk: 21 instructions fewer per pair in the portable key pass (measured with
// its earlier 16-key warps). The Hopper key pass computes each store's offset from its row and
// chunk instead: with the XOR form ptxas allocated it 24 instructions more per pair, and it ran
// 0.7-1.9 % slower (2026-12-02).
template <class Elem, bool kXorChunks, int kKeyTiles, int kRowTiles>
__device__ __forceinline__ void store_key_rows(Elem* tile, const KeyRowScores<kKeyTiles, kRowTiles>& frag, int key0,
                                               int row0, int lane) {
  using KeyRowTile = SmemTile<Elem, kTileRows>;
  constexpr int kRowBytes = kTileRows * static_cast<int>(sizeof(Elem));
  const int key = key0 + lane / 4;
  const std::uint32_t row = ptx::smem_addr(tile + KeyRowTile::offset(key, 0) + 2 * (lane % 4));
#pragma unroll
  for (int m = 0; m < kKeyTiles; ++m)
#pragma unroll
    for (int t = 0; t < kRowTiles; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const std::uint32_t pair = ElemTraits<Elem>::pack(frag[m][t][2 * h], frag[m][t][2 * h + 1]);
        const int chunk = row0 / 8 + t;
        if constexpr (kXorChunks)
          ptx::st_shared_b32((row ^ (chunk << 4)) + (16 * m + 8 * h) * kRowBytes, pair);
        else
          *reinterpret_cast<std::uint32_t*>(tile + KeyRowTile::offset(key + 16 * m + 8 * h, chunk) + 2 * (lane % 4)) =
              pair;
      }
}

}  // namespace vsa::cuda::sm80
