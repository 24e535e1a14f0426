// Hopper (sm_90a) block-sparse forward, second version: the first version's
// warpgroup and products (fwd_kernel.cuh), with the tiles brought in by the
// TMA unit instead of the threads.
//
// One thread (the producer role, thread 0) issues each Q, K and V tile as
// TMA boxes at the coordinates of the listed block, completing on a per-buffer
// mbarrier; the four warps (the consumer role) wait on that barrier, so no
// thread issues copies in the loop and no barrier waits for copies. K(t+1) is
// requested as soon as S(t) has read K(t), so it lands under the softmax and
// P·V of tile t; V(t+1) as soon as P·V(t) is done, landing under S(t+1). One
// buffer each of Q, K and V (49 KB at D = 128); the other CTAs on the SM fill
// each one's softmax with their products. Three CTAs per SM at D = 128: four
// would fit in shared memory, but at 128 registers ptxas spills the packed P
// operand in the loop, and measured 4-9 % slower (docs/kernel-notes.md).
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/launch.cuh"
#include "cuda/common/query_scheduler.cuh"
#include "cuda/sm80/fwd_epilogue.cuh"
#include "cuda/sm90/register_fragments.cuh"
#include "cuda/sm90/swizzled_tile.cuh"
#include "cuda/sm90/tensor_maps.hpp"
#include "cuda/sm90/tma.cuh"

namespace vsa::cuda::sm90 {

struct FwdTmaParams {
  FwdTensorMaps maps;  // first: 64-byte aligned
  FwdKernelParams p;
};

constexpr int kTmaFwdThreads = kWarpgroupThreads;
template <int kHeadDim>
constexpr int kTmaFwdCtasPerSm = kHeadDim == 128 ? 3 : 4;

// Where a CTA's three tiles and their barriers sit in shared memory.
template <int kHeadDim>
struct FwdTmaSmem {
  using Tile = SwizzledTile<kHeadDim>;
  static constexpr int kBytes = 3 * Tile::kBytes + 3 * 8 + 1024;  // tiles, barriers, alignment slack
  std::uint32_t q, k, v, q_full, k_full, v_full;
  __device__ explicit FwdTmaSmem(std::uint32_t base)  // base: 1024-byte aligned
      : q(base),
        k(base + Tile::kBytes),
        v(base + 2 * Tile::kBytes),
        q_full(base + 3 * Tile::kBytes),
        k_full(q_full + 8),
        v_full(q_full + 16) {}
};

// The producer's request: a [64 rows][D] tile from `row` of (head, batch), one
// 64-column box per 128-byte swizzle block, all completing on `full`.
template <int kHeadDim>
__device__ __forceinline__ void request_tile(std::uint32_t dst, std::uint32_t full, const CUtensorMap& map,
                                             std::int64_t row, int head, int batch) {
  mbarrier_expect_bytes(full, SwizzledTile<kHeadDim>::kBytes);
#pragma unroll
  for (int c = 0; c < kHeadDim / 64; ++c)
    tma_load_4d(dst + c * SwizzledTile<kHeadDim>::kBlockBytes, map, full, 64 * c, static_cast<int>(row), head, batch);
}

template <class Elem, int kHeadDim>
__global__ void __launch_bounds__(kTmaFwdThreads, kTmaFwdCtasPerSm<kHeadDim>) fwd_tma_kernel(const __grid_constant__ FwdTmaParams params) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Consumer = sm80::FwdConsumer<Elem, kHeadDim, 1>;
  constexpr bool kBf16 = ElemTraits<Elem>::kIsBf16;
  const FwdKernelParams& p = params.p;
  const FwdTensorMaps& maps = params.maps;
  extern __shared__ __align__(1024) unsigned char smem[];
  // The swizzle is applied to address bits, so tiles start on 1024 bytes.
  const FwdTmaSmem<kHeadDim> buf((ptx::smem_addr(smem) + 1023u) & ~1023u);
  const bool producer = threadIdx.x == 0;

  const QueryScheduler<kTileRows> sched(p);
  const int num_tiles = sched.num_tiles();
  const int batch = sched.batch(), kv_head = sched.kv_head();

  if (producer) {
    prefetch_tensor_map(maps.q);
    prefetch_tensor_map(maps.k);
    prefetch_tensor_map(maps.v);
    mbarrier_init(buf.q_full, 1);
    mbarrier_init(buf.k_full, 1);
    mbarrier_init(buf.v_full, 1);
    mbarrier_init_fence();
  }
  __syncthreads();  // the barriers are initialized before anyone waits on them

  const std::int64_t first_block = sched.block_of(0);
  const std::int64_t first_key = sched.first_key(0, first_block);
  if (producer) {
    request_tile<kHeadDim>(buf.q, buf.q_full, maps.q, sched.first_query_row(), sched.head(), batch);
    if (num_tiles > 0) {
      request_tile<kHeadDim>(buf.k, buf.k_full, maps.k, first_key, kv_head, batch);
      request_tile<kHeadDim>(buf.v, buf.v_full, maps.v, first_key, kv_head, batch);
    }
  }
  std::int64_t next_block = sched.block_of(1);
  int valid = num_tiles > 0 ? sched.valid_keys(0, first_block) : 0;

  Consumer consumer(static_cast<int>(threadIdx.x) / 32);
  float(&o)[kHeadDim / 2] = reinterpret_cast<float(&)[kHeadDim / 2]>(consumer.accumulators());
  mbarrier_wait(buf.q_full, 0);  // also before the epilogue stages O over Q, with no tiles
  for (int t = 0; t < num_tiles; ++t) {
    const std::uint32_t phase = static_cast<std::uint32_t>(t) & 1u;
    const bool more = t + 1 < num_tiles;
    const std::int64_t next_key = sched.first_key(t + 1, next_block);
    const int valid_next = more ? sched.valid_keys(t + 1, next_block) : 0;
    const std::int64_t block_after = sched.block_of(t + 2);

    typename Consumer::Scores s;
    float(&s_flat)[kTileRows / 2] = reinterpret_cast<float(&)[kTileRows / 2]>(s);
    mbarrier_wait(buf.k_full, phase);
    if (valid > 0) {
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk)
        wgmma_ss<kBf16, kTileRows>(s_flat, k_major_desc<kHeadDim>(buf.q, kk), k_major_desc<kHeadDim>(buf.k, kk),
                                   kk > 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(s_flat);
    }
    __syncthreads();  // every warp's S(t) has read K(t)
    if (producer && more) request_tile<kHeadDim>(buf.k, buf.k_full, maps.k, next_key, kv_head, batch);
    if (valid > 0) {
      if (valid < kTileRows) consumer.mask_keys(s, valid);
      consumer.softmax(s, p.scale_log2);
    }

    mbarrier_wait(buf.v_full, phase);
    if (valid > 0) {
      std::uint32_t a[kTileRows / 16][4];
      pack_a<Elem>(s, a);
      fence_registers(o);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kTileRows / 16; ++kk) wgmma_rs<kBf16, kHeadDim>(o, a[kk], mn_major_desc<kHeadDim>(buf.v, kk), 1);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(o);
    }
    __syncthreads();  // every warp's P·V(t) has read V(t)
    if (producer && more) request_tile<kHeadDim>(buf.v, buf.v_full, maps.v, next_key, kv_head, batch);

    next_block = block_after;
    valid = valid_next;
  }
  // Every product that read Q is done (the loop's barriers, or no tiles), and
  // every requested tile has landed: the epilogue stages O over Q.
  const auto [out, lse] = cta_outputs<Elem>(p, sched);
  Elem* stage = reinterpret_cast<Elem*>(smem + (buf.q - ptx::smem_addr(smem)));
  sm80::write_output(consumer, stage, out, p.out_stride.seq, lse);
#else
  __trap();  // built only for sm_90a; dispatch never launches it elsewhere
#endif
}

template <class Elem, int kHeadDim>
void launch_fwd_tma(const FwdKernelParams& p, const FwdTensorMaps& maps, int batch, cudaStream_t stream) {
  const FwdTmaParams params{maps, p};
  launch_kernel<fwd_tma_kernel<Elem, kHeadDim>, FwdTmaSmem<kHeadDim>::kBytes>(
      query_tile_grid<kTileRows>(p, batch), kTmaFwdThreads, stream, params, "fwd_tma_kernel (sm90)");
}

}  // namespace vsa::cuda::sm90
