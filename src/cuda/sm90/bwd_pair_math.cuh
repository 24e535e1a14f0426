// The Hopper key pass's work on one (key tile, query tile) pair, as one
// warpgroup does it on wgmma, step by step (bwd_kernel.cuh owns the order of
// the waits and barriers between them; each step says what it reads). A
// warp-specialized key pass built from the same steps was measured slower
// (docs/kernel-notes.md, "The warp-specialized key pass").
#pragma once

#include <cstdint>

#include "cuda/common/dq_accum.cuh"
#include "cuda/common/key_scheduler.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/sm80/bwd_gradients.cuh"
#include "cuda/sm90/register_fragments.cuh"
#include "cuda/sm90/swizzled_tile.cuh"
#include "cuda/sm90/tensor_maps.hpp"
#include "cuda/sm90/tma.cuh"

namespace vsa::cuda::sm90 {

// A stage holds one pair's Q and dO tiles and its lse and delta.
template <int kHeadDim>
struct PairStage {
  static constexpr int kStatsBytes = 2 * kTileRows * static_cast<int>(sizeof(float));
  static constexpr int kBytes = 2 * SwizzledTile<kHeadDim>::kBytes + kStatsBytes;
  std::uint32_t q, dout, stats;
  __device__ explicit PairStage(std::uint32_t base)
      : q(base), dout(base + SwizzledTile<kHeadDim>::kBytes), stats(base + 2 * SwizzledTile<kHeadDim>::kBytes) {}
};
// The pair's fp32 dQ tile is staged over its stage's Q and dO once dV and dK have read them.
static_assert(PairStage<128>::kBytes >= kDqTileFloats<128> * static_cast<int>(sizeof(float)));
static_assert(PairStage<64>::kBytes >= kDqTileFloats<64> * static_cast<int>(sizeof(float)));

// A pair's 64 lse and delta values (16-byte chunks, copied by the 32 threads from
// kFirstThread on) into its stage: thread t < 16 copies lse's chunk t, the next 16 delta's.
// A thread's source less the pair's row is the same for every pair, so it is formed once
// (pair_stats_source) and a pair's copy adds the pair's row (pair_stat_row) to it. In the stored
// key pass the copying warp also requests a box and is the warpgroup's slowest, so this is on
// the pair's critical chain: a branch per array took that warp 56 instructions a pair, an array
// selected per pair 28, this 18 (bf16, D = 128). The copying threads are one warp (kFirstThread
// is a multiple of 32), so a thread's chunk is its lane's.
__device__ __forceinline__ const float* pair_stats_source(const BwdKernelParams& p) {
  constexpr int kChunks = kTileRows / 4;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  return (lane < kChunks ? p.lse : p.delta) + 4 * (lane & (kChunks - 1));
}
template <int kHeadDim, int kFirstThread = 0>
__device__ __forceinline__ void load_pair_stats(const float* source, std::int64_t stat_row,
                                                const PairStage<kHeadDim>& stage) {
  static_assert(kFirstThread % 32 == 0, "the copying threads are one warp (pair_stats_source)");
  const int t = static_cast<int>(threadIdx.x) - kFirstThread;
  if (kFirstThread > 0 && t < 0) return;
  if (t < kTileRows / 2) ptx::cp_async_16(stage.stats + 16 * t, source + stat_row);
}

// A full query tile's Q and dO by TMA, one box each (a whole [64][D] tile: encode_bwd_query_maps),
// requested by lane 0 of warps 0 (Q) and 1 (dO), each announcing its box's bytes on the stage's
// barrier; warps 2 and 3 only arrive (the barrier counts one arrival a warp). One thread issuing
// every box spent ~11 % of its warp's time on them, and the warpgroup's other warps waited for it
// at the dV product's start; a box per 64 columns (four at D = 128) gave every warp a request,
// the last one besides the stats copy (~48 instructions a pair on the slowest warp).
constexpr int kPairStageArrivals = kWarpgroupThreads / 32;
template <int kHeadDim>
__device__ __forceinline__ void request_pair_tiles(const PairStage<kHeadDim>& stage, std::uint32_t bar,
                                                   const BwdQueryMaps& maps, std::int64_t row, int head, int batch,
                                                   int warp) {
  if (warp >= 2) {
    mbarrier_arrive(bar);
    return;
  }
  const bool is_q = warp == 0;
  mbarrier_expect_bytes(bar, SwizzledTile<kHeadDim>::kBytes);
  load_query_tile_whole<kHeadDim>(is_q ? stage.q : stage.dout, bar, is_q ? maps.q : maps.dout, row, head, batch);
}

// Q and dO rows of a pair, and its lse and delta, into a stage, by the 128 threads of a
// warpgroup (threadIdx.x 0..127). Padding query rows (from `real_rows` on) are zero-filled,
// not read: their P and dS are 0 by the mask.
template <class Elem, int kHeadDim>
__device__ __forceinline__ void load_pair(const BwdKernelParams& p, int batch, const BwdPair& pair, int real_rows,
                                          const PairStage<kHeadDim>& stage) {
  const BwdPairRows<Elem> rows = pair_rows<Elem, kHeadDim>(p, batch, pair);
  load_tile<Elem, kHeadDim>(stage.q, rows.q, p.q_stride.seq, real_rows);
  load_tile<Elem, kHeadDim>(stage.dout, rows.dout, p.dout_stride.seq, real_rows);
  load_pair_stats<kHeadDim>(pair_stats_source(p), pair_stat_row(p, batch, pair), stage);
}

// Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (m64n64, both operands from shared memory),
// issued and committed; `finish_pair_scores` waits for them.
template <bool kBf16, int kHeadDim>
__device__ __forceinline__ void issue_pair_scores(std::uint32_t sk, std::uint32_t sv, const PairStage<kHeadDim>& stage,
                                                  sm80::BwdScores& s, sm80::BwdScores& dp) {
  float(&s_flat)[kTileRows / 2] = reinterpret_cast<float(&)[kTileRows / 2]>(s);
  float(&dp_flat)[kTileRows / 2] = reinterpret_cast<float(&)[kTileRows / 2]>(dp);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk)
    wgmma_ss<kBf16, kTileRows>(s_flat, k_major_desc<kHeadDim>(sk, kk), k_major_desc<kHeadDim>(stage.q, kk), kk > 0);
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk)
    wgmma_ss<kBf16, kTileRows>(dp_flat, k_major_desc<kHeadDim>(sv, kk), k_major_desc<kHeadDim>(stage.dout, kk),
                               kk > 0);
  wgmma_commit();
}

__device__ __forceinline__ void finish_pair_scores(sm80::BwdScores& s, sm80::BwdScores& dp) {
  wgmma_wait<0>();
  fence_registers(reinterpret_cast<float(&)[kTileRows / 2]>(s));
  fence_registers(reinterpret_cast<float(&)[kTileRows / 2]>(dp));
}

// dV += Pᵀ·dO and dK += dSᵀ·Q (m64nD, Pᵀ and dSᵀ as register A operands),
// issued and committed, not waited for: they read the stage's dO and Q.
template <bool kBf16, int kHeadDim>
__device__ __forceinline__ void issue_key_grads(float (&dv)[kHeadDim / 2], float (&dk)[kHeadDim / 2],
                                                const std::uint32_t (&pa)[kTileRows / 16][4],
                                                const std::uint32_t (&dsa)[kTileRows / 16][4],
                                                const PairStage<kHeadDim>& stage) {
  fence_registers(dv);
  fence_registers(dk);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kTileRows / 16; ++kk)
    wgmma_rs<kBf16, kHeadDim>(dv, pa[kk], mn_major_desc<kHeadDim>(stage.dout, kk), 1);
#pragma unroll
  for (int kk = 0; kk < kTileRows / 16; ++kk)
    wgmma_rs<kBf16, kHeadDim>(dk, dsa[kk], mn_major_desc<kHeadDim>(stage.q, kk), 1);
  wgmma_commit();
}

// dQ = dS·K (m64nD; dS read transposed from the shared dSᵀ tile, K as an
// MN-major operand), waited for.
template <bool kBf16, int kHeadDim>
__device__ __forceinline__ void pair_dq(float (&dq)[kHeadDim / 2], std::uint32_t sds, std::uint32_t sk) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kTileRows / 16; ++kk)
    wgmma_ss<kBf16, kHeadDim, true>(dq, mn_major_desc<kTileRows>(sds, kk), mn_major_desc<kHeadDim>(sk, kk), kk > 0);
  wgmma_commit();
  wgmma_wait<0>();
  fence_registers(dq);
}

// dQ += dS·K over the tile's first kSteps 16-key steps (a partial block's real keys are its
// first), dS as the register A operand (the stored-dS path's dQ pass), K as an MN-major
// operand: issued and committed, not waited for.
template <bool kBf16, int kHeadDim, int kSteps>
__device__ __forceinline__ void issue_dq_product(float (&dq)[kHeadDim / 2], const std::uint32_t (&ds)[kTileRows / 16][4],
                                                 std::uint32_t sk) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) wgmma_rs<kBf16, kHeadDim>(dq, ds[kk], mn_major_desc<kHeadDim>(sk, kk), 1);
  wgmma_commit();
}

// The dQ tile in the accumulator's own order (dq_accum.cuh) at `tile`, by
// the warpgroup's thread `thread` (0..127).
template <int kHeadDim>
__device__ __forceinline__ void stage_dq_tile(std::uint32_t tile, const float (&dq)[kHeadDim / 2], int thread) {
#pragma unroll
  for (int t = 0; t < kHeadDim / 8; ++t)
    ptx::st_shared_f32x4(tile + sizeof(float) * dq_quad_offset<kHeadDim>(t, thread), dq[4 * t], dq[4 * t + 1],
                         dq[4 * t + 2], dq[4 * t + 3]);
}

}  // namespace vsa::cuda::sm90
