// The portable backward's dQ pass of the stored-dS path: a CTA of four warps
// owns one 64-row query tile, walks its list like the forward
// (QueryScheduler), and each warp adds dQ += dS·K for its 16 rows over every
// tile, dS read transposed out of the dSᵀ tile the key pass stored for the
// pair (bwd_kernel.cuh; the image is the Hopper path's, so one workspace
// layout serves both families). Each row's sum runs in list order inside one
// warp: bitwise repeatable, with nothing recomputed.
//
// Shared memory: three stages of (dSᵀ, K), 72 KB at D = 128 (within the 99 KB
// of sm_86/89/120): the copies of the next two tiles are in flight while one
// is multiplied. Only a tile's real keys' rows of dSᵀ are read (those of
// padding keys are zeros here, as are K's rows past them), so a tile of a
// block with no real keys is all zeros.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/launch.cuh"
#include "cuda/common/query_scheduler.cuh"
#include "cuda/common/stored_ds.cuh"
#include "cuda/sm80/bwd_epilogue.cuh"
#include "cuda/sm80/warp_mma.cuh"

namespace vsa::cuda::sm80 {

constexpr int kDqStoredStages = 3;

template <class Elem, int kHeadDim>
constexpr int bwd_dq_stored_smem_bytes() {
  return kDqStoredStages * (kStoredDsTileBytes + kTileRows * kHeadDim * static_cast<int>(sizeof(Elem)));
}

template <class Elem, int kHeadDim, bool kMeanGrads>
__global__ void __launch_bounds__(kBwdThreads, 2) bwd_dq_stored_kernel(const __grid_constant__ BwdKernelParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kStageBytes = kStoredDsTileBytes + kTileRows * kHeadDim * static_cast<int>(sizeof(Elem));
  const auto ds_tile = [&](int stage) { return reinterpret_cast<Elem*>(smem + stage * kStageBytes); };
  const auto k_tile = [&](int stage) { return reinterpret_cast<Elem*>(smem + stage * kStageBytes + kStoredDsTileBytes); };

  const StoredDsQueryTile query_tile(p);
  const QueryScheduler<kTileRows, BwdKernelParams>& sched = query_tile.scheduler();
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const DqTileRows<Elem> rows = dq_tile_rows<Elem>(p, sched);
  const int num_tiles = sched.num_tiles();

  // Tile t's dSᵀ and K into stage `stage` (nothing past the list; one commit group either way).
  const auto load = [&](int t, int stage) {
    if (t < num_tiles) {
      const std::int64_t block = sched.block_of(t);
      const int valid = sched.valid_keys(t, block);
      copy_stored_ds_rows<kBwdThreads>(ptx::smem_addr(ds_tile(stage)), query_tile.tile(t), valid);
      load_tile_async<Elem, kHeadDim, kBwdThreads>(k_tile(stage), rows.k + sched.first_key(t, block) * p.k_stride.seq,
                                                    p.k_stride.seq, valid);
    }
    ptx::cp_async_commit();
  };

#pragma unroll
  for (int t = 0; t < kDqStoredStages - 1; ++t) load(t, t);
  float dq[1][kHeadDim / 8][4];
#pragma unroll
  for (int t = 0; t < kHeadDim / 8; ++t) dq[0][t][0] = dq[0][t][1] = dq[0][t][2] = dq[0][t][3] = 0.0f;
  int stage = 0;  // tile t's: t % kDqStoredStages
  for (int t = 0; t < num_tiles; ++t) {
    ptx::cp_async_wait<kDqStoredStages - 2>();  // tile t has landed ...
    __syncthreads();                             // ... for every thread; every warp is done with tile t − 1
    load(t + kDqStoredStages - 1, stage == 0 ? kDqStoredStages - 1 : stage - 1);  // into tile t − 1's stage
    warp_accumulate_transposed<Elem, kTileRows, kTileRows, kHeadDim>(dq, ds_tile(stage), warp, k_tile(stage), lane);
    stage = stage == kDqStoredStages - 1 ? 0 : stage + 1;
  }
  ptx::cp_async_wait<0>();  // the copies past the list's end (none issued, but committed)
  __syncthreads();          // and every warp is done with stage 0 before it is used for staging
  write_warp_rows<Elem, kHeadDim>(dq, p.scale, warp, lane, ds_tile(0), rows.dq, p.dq_stride.seq, sched.real_rows(),
                                  query_mean_grad_rows<kMeanGrads>(p, sched, kHeadDim));
}

template <class Elem, int kHeadDim>
void launch_bwd_dq_stored(const BwdKernelParams& p, int query_heads, cudaStream_t stream) {
  with_mean_grads(p.dq_mean != nullptr, [&](auto mean_grads) {
    launch_kernel<bwd_dq_stored_kernel<Elem, kHeadDim, decltype(mean_grads)::value>,
                  bwd_dq_stored_smem_bytes<Elem, kHeadDim>()>(StoredDsQueryTile::grid(p, query_heads), kBwdThreads,
                                                              stream, p, "bwd_dq_stored_kernel (sm80)");
  });
}

}  // namespace vsa::cuda::sm80
