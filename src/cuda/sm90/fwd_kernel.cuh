// Hopper (sm_90a) block-sparse forward, first version: one warpgroup (four
// warps, 128 threads) per 64-row query tile, S = Q·Kᵀ and O += P·V on
// wgmma. Q, K and V are read by the tensor cores straight from shared memory
// (no ldmatrix through registers); P goes from the S accumulators to the
// A operand of the second product in registers.
//
// Loads are cp.async into the 128-byte-swizzled layout wgmma reads, one K
// and one V buffer pipelined against each other as in the sm80 kernel. The
// online softmax and the epilogue are the sm80 kernel's, with one 16-row tile
// per warp (the wgmma accumulator fragment of a warp is the mma.sync one).
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/launch.cuh"
#include "cuda/sm80/fwd_epilogue.cuh"
#include "cuda/common/query_scheduler.cuh"
#include "cuda/sm90/register_fragments.cuh"
#include "cuda/sm90/swizzled_tile.cuh"

namespace vsa::cuda::sm90 {

constexpr int kThreads = kWarpgroupThreads;  // one warpgroup

template <class Elem, int kHeadDim>
__global__ void __launch_bounds__(kThreads, 3) fwd_kernel(const __grid_constant__ FwdKernelParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tile = SwizzledTile<kHeadDim>;
  using Consumer = sm80::FwdConsumer<Elem, kHeadDim, 1>;
  constexpr bool kBf16 = ElemTraits<Elem>::kIsBf16;
  extern __shared__ __align__(1024) unsigned char smem[];
  // The swizzle is applied to address bits, so tiles start on 1024 bytes.
  const std::uint32_t base = (ptx::smem_addr(smem) + 1023u) & ~1023u;
  const std::uint32_t sq = base, sk = base + Tile::kBytes, sv = base + 2 * Tile::kBytes;

  const QueryScheduler<kTileRows> sched(p);
  // Read by the epilogue.
  sm80::prefetch_gate_rows<Elem, kHeadDim>(p, sched, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
  const auto [q, k, v] = cta_inputs<Elem>(p, sched);
  const int num_tiles = sched.num_tiles();

  load_tile<Elem, kHeadDim>(sq, q, p.q_stride.seq);
  const std::int64_t first_block = sched.block_of(0);
  std::int64_t key = sched.first_key(0, first_block);
  if (num_tiles > 0) load_tile<Elem, kHeadDim>(sk, k + key * p.k_stride.seq, p.k_stride.seq);
  ptx::cp_async_commit();
  std::int64_t next_block = sched.block_of(1);
  int valid = num_tiles > 0 ? sched.valid_keys(0, first_block) : 0;

  Consumer consumer(static_cast<int>(threadIdx.x) / 32);
  float(&o)[kHeadDim / 2] = reinterpret_cast<float(&)[kHeadDim / 2]>(consumer.accumulators());
  for (int t = 0; t < num_tiles; ++t) {
    ptx::cp_async_wait<0>();  // K(t) (and Q) written by this thread ...
    fence_proxy_async();      // ... and visible to wgmma's reads ...
    __syncthreads();          // ... for every thread; every warp is done with V(t-1)
    load_tile<Elem, kHeadDim>(sv, v + key * p.v_stride.seq, p.v_stride.seq, valid);
    ptx::cp_async_commit();
    const std::int64_t next_key = sched.first_key(t + 1, next_block);
    const int valid_next = t + 1 < num_tiles ? sched.valid_keys(t + 1, next_block) : 0;
    const std::int64_t block_after = sched.block_of(t + 2);

    typename Consumer::Scores s;
    float(&s_flat)[kTileRows / 2] = reinterpret_cast<float(&)[kTileRows / 2]>(s);
    if (valid > 0) {
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk)
        wgmma_ss<kBf16, kTileRows>(s_flat, k_major_desc<kHeadDim>(sq, kk), k_major_desc<kHeadDim>(sk, kk), kk > 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(s_flat);
      if (valid < kTileRows) consumer.mask_keys(s, valid);
      consumer.softmax(s, p.scale_log2);
    }

    ptx::cp_async_wait<0>();  // V(t) ...
    fence_proxy_async();
    __syncthreads();          // ... for every thread; every warp is done with K(t)
    if (t + 1 < num_tiles) load_tile<Elem, kHeadDim>(sk, k + next_key * p.k_stride.seq, p.k_stride.seq);
    ptx::cp_async_commit();
    if (valid > 0) {
      std::uint32_t a[kTileRows / 16][4];
      pack_a<Elem>(s, a);
      fence_registers(o);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kTileRows / 16; ++kk) wgmma_rs<kBf16, kHeadDim>(o, a[kk], mn_major_desc<kHeadDim>(sv, kk), 1);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(o);
    }

    key = next_key;
    next_block = block_after;
    valid = valid_next;
  }
  ptx::cp_async_wait<0>();
  __syncthreads();  // every wgmma read of Q is done: the epilogue stages O over it

  // Generic stores into the staging rows: plain [row][D] layout, as sm80's.
  Elem* stage = reinterpret_cast<Elem*>(smem + (sq - ptx::smem_addr(smem)));
  sm80::write_output(consumer, stage, cta_outputs<Elem, kHeadDim>(p, sched), sched.real_rows());
#else
  __trap();  // built only for sm_90a; dispatch never launches it elsewhere
#endif
}

template <class Elem, int kHeadDim>
constexpr int fwd_smem_bytes() {
  return 3 * SwizzledTile<kHeadDim>::kBytes + 1024;  // Q, K, V, alignment slack
}

template <class Elem, int kHeadDim>
void launch_fwd(const FwdKernelParams& p, int batch, cudaStream_t stream) {
  launch_kernel<fwd_kernel<Elem, kHeadDim>, fwd_smem_bytes<Elem, kHeadDim>()>(
      query_tile_grid<kTileRows>(p, batch), kThreads, stream, p, "fwd_kernel (sm90)");
}

}  // namespace vsa::cuda::sm90
