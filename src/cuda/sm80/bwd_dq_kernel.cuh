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

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/query_scheduler.cuh"
#include "cuda/sm80/bwd_epilogue.cuh"
#include "cuda/sm80/bwd_gradients.cuh"
#include "cuda/sm80/warp_mma.cuh"

namespace vsa::cuda::sm80 {

template <class Elem, int kHeadDim>
constexpr int bwd_dq_smem_bytes() {
  return 6 * kTileRows * kHeadDim * static_cast<int>(sizeof(Elem));  // Q, dO, two stages of K and V
}

template <class Elem, int kHeadDim>
__global__ void __launch_bounds__(kBwdThreads, 2) bwd_dq_kernel(const __grid_constant__ BwdKernelParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kTile = kTileRows * kHeadDim;
  Elem* const sq = reinterpret_cast<Elem*>(smem);
  Elem* const sdo = sq + kTile;
  auto k_tile = [&](int stage) { return sdo + (1 + 2 * stage) * kTile; };
  auto v_tile = [&](int stage) { return sdo + (2 + 2 * stage) * kTile; };

  const QueryScheduler<kTileRows, BwdKernelParams> sched(p);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int b = sched.batch(), h = sched.head(), kvh = sched.kv_head();
  const std::int64_t row0 = sched.first_query_row();
  const Elem* const k = static_cast<const Elem*>(p.k) + b * p.k_stride.batch + kvh * p.k_stride.head;
  const Elem* const v = static_cast<const Elem*>(p.v) + b * p.v_stride.batch + kvh * p.v_stride.head;
  const int num_tiles = sched.num_tiles();

  load_tile_async<Elem, kHeadDim, kBwdThreads>(
      sq, static_cast<const Elem*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head + row0 * p.q_stride.seq,
      p.q_stride.seq);
  load_tile_async<Elem, kHeadDim, kBwdThreads>(
      sdo,
      static_cast<const Elem*>(p.dout) + b * p.dout_stride.batch + h * p.dout_stride.head + row0 * p.dout_stride.seq,
      p.dout_stride.seq);
  const std::int64_t first_block = sched.block_of(0);
  const std::int64_t key = sched.first_key(0, first_block);
  if (num_tiles > 0) {
    load_tile_async<Elem, kHeadDim, kBwdThreads>(k_tile(0), k + key * p.k_stride.seq, p.k_stride.seq);
    load_tile_async<Elem, kHeadDim, kBwdThreads>(v_tile(0), v + key * p.v_stride.seq, p.v_stride.seq);
  }
  ptx::cp_async_commit();
  std::int64_t next_block = sched.block_of(1);
  int valid = num_tiles > 0 ? sched.valid_keys(0, first_block) : 0;

  // The thread's two rows: their lse and delta stay in registers.
  const std::int64_t stat = (static_cast<std::int64_t>(b) * p.heads + h) * p.seq_q + row0 + 16 * warp + lane / 4;
  const float lse[2] = {__ldg(p.lse + stat), __ldg(p.lse + stat + 8)};
  const float delta[2] = {__ldg(p.delta + stat), __ldg(p.delta + stat + 8)};

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
      load_tile_async<Elem, kHeadDim, kBwdThreads>(k_tile(stage ^ 1), k + next_key * p.k_stride.seq, p.k_stride.seq);
      load_tile_async<Elem, kHeadDim, kBwdThreads>(v_tile(stage ^ 1), v + next_key * p.v_stride.seq, p.v_stride.seq);
    }
    ptx::cp_async_commit();
    if (valid > 0) {  // a tile of a block with vbs = 0 adds nothing
      BwdScores s, dp;
      warp_scores<Elem, kHeadDim>(sq, 16 * warp, k_tile(stage), s, lane);
      warp_scores<Elem, kHeadDim>(sdo, 16 * warp, v_tile(stage), dp, lane);
      query_scores_to_gradients(s, dp, lse, delta, p.scale_log2, valid, lane);
      warp_accumulate<Elem, kHeadDim>(dq, dp, k_tile(stage), lane);
    }
    next_block = block_after;
    valid = valid_next;
  }
  ptx::cp_async_wait<0>();  // with no tiles, Q and dO are still in flight
  __syncthreads();          // and every warp is done reading Q before it is used for staging
  write_warp_rows<Elem, kHeadDim>(
      dq, p.scale, warp, lane, sq,
      static_cast<Elem*>(p.dq) + b * p.dq_stride.batch + h * p.dq_stride.head + row0 * p.dq_stride.seq,
      p.dq_stride.seq);
}

template <class Elem, int kHeadDim>
void launch_bwd_dq(const BwdKernelParams& p, int batch, cudaStream_t stream) {
  constexpr int kSmem = bwd_dq_smem_bytes<Elem, kHeadDim>();
  static const cudaError_t attribute_status =
      cudaFuncSetAttribute(bwd_dq_kernel<Elem, kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  check_cuda(attribute_status, "cudaFuncSetAttribute(sm80 bwd_dq_kernel)");
  const dim3 grid(static_cast<unsigned>(p.num_q_blocks * (p.block / kTileRows)), static_cast<unsigned>(p.heads),
                  static_cast<unsigned>(batch));
  bwd_dq_kernel<Elem, kHeadDim><<<grid, kBwdThreads, kSmem, stream>>>(p);
  check_launch("bwd_dq_kernel (sm80)");
}

}  // namespace vsa::cuda::sm80
