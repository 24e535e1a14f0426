// Hopper (sm_90a) backward, dQ pass: one warpgroup per 64-row query tile
// walks its list of KV tiles like the forward (QueryScheduler), recomputing
// S = Q·Kᵀ and dP = dO·Vᵀ (m64n64 wgmma from shared memory), forming
// dS = P ∘ (dP − delta) in registers (the portable kernel's elementwise step)
// and accumulating dQ += dS·K (m64nD wgmma, dS as the register A operand, K
// MN-major — the forward's O += P·V with K for V). Each row's sum runs in
// list order inside one warpgroup: bitwise repeatable.
//
// Shared memory: Q and dO (resident) and two stages of K and V, 97 KB at
// D = 128: the next tile lands while this one is computed. Two CTAs per SM.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/launch.cuh"
#include "cuda/common/query_scheduler.cuh"
#include "cuda/sm80/bwd_epilogue.cuh"
#include "cuda/sm80/bwd_gradients.cuh"
#include "cuda/sm90/register_fragments.cuh"
#include "cuda/sm90/swizzled_tile.cuh"

namespace vsa::cuda::sm90 {

template <class Elem, int kHeadDim>
constexpr int bwd_dq_smem_bytes() {
  return 6 * SwizzledTile<kHeadDim>::kBytes + 1024;  // Q, dO, two stages of K and V; alignment slack
}

template <class Elem, int kHeadDim, bool kMeanGrads>
__global__ void __launch_bounds__(kWarpgroupThreads, 2) bwd_dq_kernel(const __grid_constant__ BwdKernelParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tile = SwizzledTile<kHeadDim>;
  constexpr bool kBf16 = ElemTraits<Elem>::kIsBf16;
  extern __shared__ __align__(1024) unsigned char smem[];
  // The swizzle is applied to address bits, so tiles start on 1024 bytes.
  const std::uint32_t smem0 = ptx::smem_addr(smem);
  const std::uint32_t sq = (smem0 + 1023u) & ~1023u, sdo = sq + Tile::kBytes;
  auto k_tile = [&](int stage) { return sdo + (1 + 2 * stage) * Tile::kBytes; };
  auto v_tile = [&](int stage) { return sdo + (2 + 2 * stage) * Tile::kBytes; };

  const QueryScheduler<kTileRows, BwdKernelParams> sched(p);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const DqTileRows<Elem> rows = dq_tile_rows<Elem>(p, sched);
  const Elem* const k = rows.k;
  const Elem* const v = rows.v;
  const int num_tiles = sched.num_tiles();

  load_tile<Elem, kHeadDim>(sq, rows.q, p.q_stride.seq);
  load_tile<Elem, kHeadDim>(sdo, rows.dout, p.dout_stride.seq);
  const std::int64_t first_block = sched.block_of(0);
  const std::int64_t key = sched.first_key(0, first_block);
  int valid = num_tiles > 0 ? sched.valid_keys(0, first_block) : 0;
  if (num_tiles > 0) {
    load_tile<Elem, kHeadDim>(k_tile(0), k + key * p.k_stride.seq, p.k_stride.seq, valid);  // dQ += dS·K
    load_tile<Elem, kHeadDim>(v_tile(0), v + key * p.v_stride.seq, p.v_stride.seq);
  }
  ptx::cp_async_commit();
  std::int64_t next_block = sched.block_of(1);

  const RowStats stats(p, rows.stat + 16 * warp + lane / 4);

  float dq[kHeadDim / 2];
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) dq[i] = 0.0f;
  for (int t = 0; t < num_tiles; ++t) {
    const int stage = t & 1;
    ptx::cp_async_wait<0>();  // tile t (and Q, dO) written by this thread ...
    fence_proxy_async();      // ... visible to wgmma ...
    __syncthreads();          // ... for every thread; every product on tile t-1's stage is done
    const std::int64_t next_key = sched.first_key(t + 1, next_block);
    const int valid_next = t + 1 < num_tiles ? sched.valid_keys(t + 1, next_block) : 0;
    const std::int64_t block_after = sched.block_of(t + 2);
    if (t + 1 < num_tiles) {
      load_tile<Elem, kHeadDim>(k_tile(stage ^ 1), k + next_key * p.k_stride.seq, p.k_stride.seq,
                                                    valid_next);
      load_tile<Elem, kHeadDim>(v_tile(stage ^ 1), v + next_key * p.v_stride.seq, p.v_stride.seq);
    }
    ptx::cp_async_commit();
    if (valid > 0) {  // a tile of a block with vbs = 0 adds nothing
      sm80::BwdScores s, dp;
      float(&s_flat)[kTileRows / 2] = reinterpret_cast<float(&)[kTileRows / 2]>(s);
      float(&dp_flat)[kTileRows / 2] = reinterpret_cast<float(&)[kTileRows / 2]>(dp);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk)
        wgmma_ss<kBf16, kTileRows>(s_flat, k_major_desc<kHeadDim>(sq, kk), k_major_desc<kHeadDim>(k_tile(stage), kk),
                                   kk > 0);
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk)
        wgmma_ss<kBf16, kTileRows>(dp_flat, k_major_desc<kHeadDim>(sdo, kk),
                                   k_major_desc<kHeadDim>(v_tile(stage), kk), kk > 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(s_flat);
      fence_registers(dp_flat);
      sm80::query_scores_to_gradients(s, dp, stats.lse, stats.delta, p.scale_log2, valid, lane);
      std::uint32_t a[kTileRows / 16][4];
      pack_a<Elem>(dp, a);
      fence_registers(dq);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kTileRows / 16; ++kk)
        wgmma_rs<kBf16, kHeadDim>(dq, a[kk], mn_major_desc<kHeadDim>(k_tile(stage), kk), 1);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(dq);
    }
    next_block = block_after;
    valid = valid_next;
  }
  const int real_rows = sched.real_rows();  // padding rows' dq is zero
  ptx::cp_async_wait<0>();  // with no tiles, Q and dO are still in flight
  __syncthreads();          // and every product reading Q is done before it is used for staging
  using Grad = float[1][kHeadDim / 8][4];
  sm80::write_warp_rows<Elem, kHeadDim>(reinterpret_cast<const Grad&>(dq), p.scale, warp, lane,
                                        reinterpret_cast<Elem*>(smem + (sq - smem0)), rows.dq, p.dq_stride.seq,
                                        real_rows, query_mean_grad_rows<kMeanGrads>(p, sched, kHeadDim));
#else
  __trap();  // built only for sm_90a; dispatch never launches it elsewhere
#endif
}

template <class Elem, int kHeadDim>
void launch_bwd_dq(const BwdKernelParams& p, int batch, cudaStream_t stream) {
  with_mean_grads(p.dq_mean != nullptr, [&](auto mean_grads) {
    launch_kernel<bwd_dq_kernel<Elem, kHeadDim, decltype(mean_grads)::value>, bwd_dq_smem_bytes<Elem, kHeadDim>()>(
        query_tile_grid<kTileRows>(p, batch), kWarpgroupThreads, stream, p, "bwd_dq_kernel (sm90)");
  });
}

}  // namespace vsa::cuda::sm90
