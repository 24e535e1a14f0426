// Hopper (sm_90a) backward, dQ pass of the stored-dS path: one warpgroup per
// 64-row query tile walks its list like the forward (QueryScheduler) and sums
// dQ += dS·K over it, dS as the register A operand, taken from the fragments
// the key pass stored for the pair (stored_ds_fragments.cuh), K as an
// MN-major operand in shared memory: the key pass's dK product's shape, here
// in list order inside one warpgroup, so bitwise repeatable. Nothing is
// recomputed: a tile costs 8 KB of dS and the K tile, one product of depth 64.
//
// Shared memory: three stages of (dS fragments, K), 72 KB at D = 128, so three
// CTAs share an SM; the copies of the next two tiles are in flight while one
// is multiplied. Only a tile's real keys' steps of dS are read (the others are
// zeros, as are its K rows past them), and a tile of at most 16 (32) real
// keys is multiplied over its first 16 (32) keys only: a partial block's
// bytes and products shrink with its keys. A tile of a block with no real
// keys (vbs = 0: its key pass stored nothing) is all zeros.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/launch.cuh"
#include "cuda/common/query_scheduler.cuh"
#include "cuda/common/stored_ds.cuh"
#include "cuda/sm80/bwd_epilogue.cuh"
#include "cuda/sm90/bwd_pair_math.cuh"
#include "cuda/sm90/stored_ds_fragments.cuh"
#include "cuda/sm90/swizzled_tile.cuh"

namespace vsa::cuda::sm90 {

constexpr int kDqStoredStages = 3;
static_assert(SwizzledTile<kTileRows>::kBytes == kStoredDsTileBytes, "a stage holds a stored tile");

template <int kHeadDim>
struct StoredDsStage {
  static constexpr int kBytes = SwizzledTile<kTileRows>::kBytes + SwizzledTile<kHeadDim>::kBytes;  // 1024-multiple
  std::uint32_t ds, k;
  __device__ explicit StoredDsStage(std::uint32_t base) : ds(base), k(base + SwizzledTile<kTileRows>::kBytes) {}
};

template <class Elem, int kHeadDim>
constexpr int bwd_dq_stored_smem_bytes() {
  return kDqStoredStages * StoredDsStage<kHeadDim>::kBytes + 1024;  // alignment slack
}

template <class Elem, int kHeadDim, bool kMeanGrads>
__global__ void __launch_bounds__(kWarpgroupThreads, 3)
    bwd_dq_stored_kernel(const __grid_constant__ BwdKernelParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr bool kBf16 = ElemTraits<Elem>::kIsBf16;
  extern __shared__ __align__(1024) unsigned char smem[];
  // The swizzle is applied to address bits, so tiles start on 1024 bytes.
  const std::uint32_t smem0 = ptx::smem_addr(smem);
  const std::uint32_t stage0 = (smem0 + 1023u) & ~1023u;
  auto stage_of = [&](int index) {
    return StoredDsStage<kHeadDim>(stage0 + static_cast<std::uint32_t>(index * StoredDsStage<kHeadDim>::kBytes));
  };

  const StoredDsQueryTile query_tile(p);
  const QueryScheduler<kTileRows, BwdKernelParams>& sched = query_tile.scheduler();
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const DqTileRows<Elem> rows = dq_tile_rows<Elem>(p, sched);
  const int num_tiles = sched.num_tiles();

  // Tile t's dS fragments and K into stage `stage` (nothing past the list; one commit group
  // either way); returns its real keys.
  const auto load = [&](int t, int stage) {
    int valid = 0;
    if (t < num_tiles) {
      const StoredDsStage<kHeadDim> dst = stage_of(stage);
      const std::int64_t block = sched.block_of(t);
      valid = sched.valid_keys(t, block);
      copy_ds_fragments(dst.ds, query_tile.tile(t), valid, warp, lane);
      load_tile<Elem, kHeadDim>(dst.k, rows.k + sched.first_key(t, block) * p.k_stride.seq, p.k_stride.seq, valid);
    }
    ptx::cp_async_commit();
    return valid;
  };

  // The real keys of tiles t, t + 1 and t + 2 (the stages in flight).
  int valid = load(0, 0), valid_next = load(1, 1);
  static_assert(kDqStoredStages == 3, "three tiles' keys in flight");
  float dq[kHeadDim / 2];
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) dq[i] = 0.0f;
  int stage = 0;  // tile t's: t % kDqStoredStages
  for (int t = 0; t < num_tiles; ++t) {
    ptx::cp_async_wait<kDqStoredStages - 2>();  // tile t written by this thread ...
    fence_proxy_async();                         // ... visible to wgmma ...
    __syncthreads();                             // ... for every thread; tile t − 1's product is done
    const StoredDsStage<kHeadDim> s = stage_of(stage);
    fence_registers(dq);
    with_tile_width(valid, [&](auto keys) {
      constexpr int kSteps = decltype(keys)::value / 16;
      std::uint32_t ds[kDsSteps][4];
      load_dq_operand<kSteps>(s.ds, ds, warp, lane);
      issue_dq_product<kBf16, kHeadDim, kSteps>(dq, ds, s.k);
    });
    // Tile t + 2 is found (list reads from global memory) and its copies issued while tile
    // t's product is on the tensor cores, into tile t − 1's stage, whose product was waited for.
    const int refill = stage == 0 ? kDqStoredStages - 1 : stage - 1;
    const int valid_after = load(t + kDqStoredStages - 1, refill);
    wgmma_wait<0>();
    fence_registers(dq);
    valid = valid_next;
    valid_next = valid_after;
    stage = stage == kDqStoredStages - 1 ? 0 : stage + 1;
  }
  ptx::cp_async_wait<0>();  // the copies past the list's end (none issued, but committed)
  __syncthreads();          // and every product done before stage 0 is used for staging
  using Grad = float[1][kHeadDim / 8][4];
  sm80::write_warp_rows<Elem, kHeadDim>(reinterpret_cast<const Grad&>(dq), p.scale, warp, lane,
                                        reinterpret_cast<Elem*>(smem + (stage0 - smem0)), rows.dq, p.dq_stride.seq,
                                        sched.real_rows(), query_mean_grad_rows<kMeanGrads>(p, sched, kHeadDim));
#else
  __trap();  // built only for sm_90a; dispatch never launches it elsewhere
#endif
}

template <class Elem, int kHeadDim>
void launch_bwd_dq_stored(const BwdKernelParams& p, int query_heads, cudaStream_t stream) {
  with_mean_grads(p.dq_mean != nullptr, [&](auto mean_grads) {
    launch_kernel<bwd_dq_stored_kernel<Elem, kHeadDim, decltype(mean_grads)::value>,
                  bwd_dq_stored_smem_bytes<Elem, kHeadDim>()>(StoredDsQueryTile::grid(p, query_heads), kWarpgroupThreads,
                                                              stream, p, "bwd_dq_stored_kernel (sm90)");
  });
}

}  // namespace vsa::cuda::sm90
