// The portable backward's dQ pass: a CTA of four warps owns one 64-row query
// tile, walks its list of KV tiles like the forward (QueryScheduler) and,
// warp by warp (16 rows each), recomputes
//
//   S = Q·Kᵀ, dP = dO·Vᵀ, P = exp2(S·scale·log2e − lse), dS = P ∘ (dP − delta)
//
// and accumulates dQ += dS·K in registers; dq is written once, scaled. Each
// row's sum runs in list order inside one warp: bitwise repeatable, at the
// price of recomputing S and dP (the key pass then skips dQ).
//
// Shared memory: Q and dO (resident) and two stages of K and V, so the next
// tile lands while this one is computed: 96 KB at D = 128, within the 99 KB
// of sm_86/89/120.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/launch.cuh"
#include "cuda/common/query_scheduler.cuh"
#include "cuda/sm80/bwd_epilogue.cuh"
#include "cuda/sm80/bwd_gradients.cuh"
#include "cuda/sm80/warp_mma.cuh"

namespace vsa::cuda::sm80 {

template <class Elem, int kHeadDim>
constexpr int bwd_dq_smem_bytes() {
  return 6 * kTileRows * kHeadDim * static_cast<int>(sizeof(Elem));  // Q, dO, two stages of K and V
}

template <class Elem, int kHeadDim, bool kMeanGrads>
__global__ void __launch_bounds__(kBwdThreads, 2) bwd_dq_kernel(const __grid_constant__ BwdKernelParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kTile = kTileRows * kHeadDim;
  Elem* const sq = reinterpret_cast<Elem*>(smem);
  Elem* const sdo = sq + kTile;
  auto k_tile = [&](int stage) { return sdo + (1 + 2 * stage) * kTile; };
  auto v_tile = [&](int stage) { return sdo + (2 + 2 * stage) * kTile; };

  const QueryScheduler<kTileRows, BwdKernelParams> sched(p);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const DqTileRows<Elem> rows = dq_tile_rows<Elem>(p, sched);
  const Elem* const k = rows.k;
  const Elem* const v = rows.v;
  const int num_tiles = sched.num_tiles();

  load_tile_async<Elem, kHeadDim, kBwdThreads>(sq, rows.q, p.q_stride.seq);
  load_tile_async<Elem, kHeadDim, kBwdThreads>(sdo, rows.dout, p.dout_stride.seq);
  const std::int64_t first_block = sched.block_of(0);
  const std::int64_t key = sched.first_key(0, first_block);
  int valid = num_tiles > 0 ? sched.valid_keys(0, first_block) : 0;
  if (num_tiles > 0) {
    load_tile_async<Elem, kHeadDim, kBwdThreads>(k_tile(0), k + key * p.k_stride.seq, p.k_stride.seq, valid);  // dQ += dS·K
    load_tile_async<Elem, kHeadDim, kBwdThreads>(v_tile(0), v + key * p.v_stride.seq, p.v_stride.seq);
  }
  ptx::cp_async_commit();
  std::int64_t next_block = sched.block_of(1);

  const RowStats stats(p, rows.stat + 16 * warp + lane / 4);

  float dq[1][kHeadDim / 8][4];
#pragma unroll
  for (int t = 0; t < kHeadDim / 8; ++t) dq[0][t][0] = dq[0][t][1] = dq[0][t][2] = dq[0][t][3] = 0.0f;
  for (int t = 0; t < num_tiles; ++t) {
    const int stage = t & 1;
    ptx::cp_async_wait<0>();  // tile t (and Q, dO) has landed ...
    __syncthreads();          // ... for every thread; every warp is done with tile t-1's stage
    const std::int64_t next_key = sched.first_key(t + 1, next_block);
    const int valid_next = t + 1 < num_tiles ? sched.valid_keys(t + 1, next_block) : 0;
    const std::int64_t block_after = sched.block_of(t + 2);
    if (t + 1 < num_tiles) {
      load_tile_async<Elem, kHeadDim, kBwdThreads>(k_tile(stage ^ 1), k + next_key * p.k_stride.seq, p.k_stride.seq,
                                                    valid_next);
      load_tile_async<Elem, kHeadDim, kBwdThreads>(v_tile(stage ^ 1), v + next_key * p.v_stride.seq, p.v_stride.seq);
    }
    ptx::cp_async_commit();
    if (valid > 0) {  // a tile of a block with vbs = 0 adds nothing
      BwdScores s, dp;
      warp_scores<Elem, kHeadDim>(sq, 16 * warp, k_tile(stage), s, lane);
      warp_scores<Elem, kHeadDim>(sdo, 16 * warp, v_tile(stage), dp, lane);
      query_scores_to_gradients(s, dp, stats.lse, stats.delta, p.scale_log2, valid, lane);
      warp_accumulate<Elem, kHeadDim>(dq, dp, k_tile(stage), lane);
    }
    next_block = block_after;
    valid = valid_next;
  }
  const int real_rows = sched.real_rows();  // padding rows' dq is zero
  ptx::cp_async_wait<0>();  // with no tiles, Q and dO are still in flight
  __syncthreads();          // and every warp is done reading Q before it is used for staging
  write_warp_rows<Elem, kHeadDim>(dq, p.scale, warp, lane, sq, rows.dq, p.dq_stride.seq, real_rows,
                                  query_mean_grad_rows<kMeanGrads>(p, sched, kHeadDim));
}

template <class Elem, int kHeadDim>
void launch_bwd_dq(const BwdKernelParams& p, int batch, cudaStream_t stream) {
  with_mean_grads(p.dq_mean != nullptr, [&](auto mean_grads) {
    launch_kernel<bwd_dq_kernel<Elem, kHeadDim, decltype(mean_grads)::value>, bwd_dq_smem_bytes<Elem, kHeadDim>()>(
        query_tile_grid<kTileRows>(p, batch), kBwdThreads, stream, p, "bwd_dq_kernel (sm80)");
  });
}

}  // namespace vsa::cuda::sm80
