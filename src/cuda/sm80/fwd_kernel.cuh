// The portable (sm_80+) block-sparse forward kernel: one CTA of four warps
// owns 64 query rows and walks only the KV tiles its query block lists.
//
// Pipeline: two shared-memory stages of (K, V). While tile t is consumed from
// one stage, the copy of the next listed tile into the other stage is in
// flight, so a whole iteration hides the L2/HBM latency of the next tile.
//
// Occupancy: Q passes through stage 1 on its way into registers, and O leaves
// through stage 0, so a CTA needs only the two stages of shared memory (64 KB
// at D = 128); with registers capped to match, 3 CTAs (D = 128) or 4 (D = 64)
// share an SM, so one CTA's softmax overlaps another's matrix products.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/cuda_check.hpp"
#include "cuda/sm80/fwd_epilogue.cuh"

namespace vsa::cuda::sm80 {

constexpr int kFwdThreads = 128;
constexpr int kKvStages = 2;

template <class Elem, int kHeadDim>
constexpr int fwd_smem_bytes() {
  return 2 * kKvStages * SmemTile<Elem, kHeadDim>::kElems * static_cast<int>(sizeof(Elem));
}

template <int kHeadDim>
constexpr int fwd_ctas_per_sm() {
  return kHeadDim == 128 ? 3 : 4;
}

// Issues the copies of the K and V rows of one KV tile into a stage.
template <class Elem, int kHeadDim>
__device__ __forceinline__ void load_kv_stage(Elem* stage, const Elem* k, const Elem* v,
                                              const FwdKernelParams& p, std::int64_t key) {
  using Tile = SmemTile<Elem, kHeadDim>;
  load_tile_async<Elem, kHeadDim, kFwdThreads>(stage, k + key * p.k_stride.seq, p.k_stride.seq);
  load_tile_async<Elem, kHeadDim, kFwdThreads>(stage + Tile::kElems, v + key * p.v_stride.seq,
                                               p.v_stride.seq);
}

template <class Elem, int kHeadDim>
__global__ void __launch_bounds__(kFwdThreads, fwd_ctas_per_sm<kHeadDim>()) fwd_kernel(const __grid_constant__ FwdKernelParams p) {
  using Tile = SmemTile<Elem, kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem[];
  // [K0 V0][K1 V1]: stage s holds K at its start and V right after.
  Elem* const stages = reinterpret_cast<Elem*>(smem);
  const auto stage_base = [&](int stage) { return stages + 2 * stage * Tile::kElems; };
  Elem* const sq = stage_base(1);  // until Q is in registers

  const FwdScheduler sched(p);
  const std::int64_t q_row0 = sched.first_query_row();
  const Elem* q = static_cast<const Elem*>(p.q) + sched.batch() * p.q_stride.batch +
                  sched.head() * p.q_stride.head + q_row0 * p.q_stride.seq;
  const Elem* k = static_cast<const Elem*>(p.k) + sched.batch() * p.k_stride.batch +
                  sched.kv_head() * p.k_stride.head;
  const Elem* v = static_cast<const Elem*>(p.v) + sched.batch() * p.v_stride.batch +
                  sched.kv_head() * p.v_stride.head;
  const int num_tiles = sched.num_tiles();

  load_tile_async<Elem, kHeadDim, kFwdThreads>(sq, q, p.q_stride.seq);
  const std::int64_t first_block = sched.block_of(0);
  if (num_tiles > 0) load_kv_stage<Elem, kHeadDim>(stage_base(0), k, v, p, sched.first_key(0, first_block));
  ptx::cp_async_commit();  // group: Q and the first tile
  std::int64_t next_block = sched.block_of(1);
  int valid = num_tiles > 0 ? sched.valid_keys(0, first_block) : 0;
  ptx::cp_async_wait<0>();
  __syncthreads();

  FwdConsumer<Elem, kHeadDim> consumer(static_cast<int>(threadIdx.x) / 32);
  consumer.load_q(sq);
  __syncthreads();  // Q's shared copy is dead: stage 1 may now be overwritten

  for (int t = 0, stage = 0; t < num_tiles; ++t, stage ^= 1) {
    // The other stage was released by the barrier that ended the last iteration.
    if (t + 1 < num_tiles)
      load_kv_stage<Elem, kHeadDim>(stage_base(stage ^ 1), k, v, p, sched.first_key(t + 1, next_block));
    ptx::cp_async_commit();  // committed even when empty: keeps the group count uniform
    // Metadata for the coming iterations, loaded now and first used there.
    const std::int64_t block_after = sched.block_of(t + 2);
    const int valid_next = t + 1 < num_tiles ? sched.valid_keys(t + 1, next_block) : 0;

    if (valid > 0) {  // a tile of a block with vbs = 0 has nothing to attend
      typename FwdConsumer<Elem, kHeadDim>::Scores s;
      consumer.scores(stage_base(stage), s);
      if (valid < kTileRows) consumer.mask_keys(s, valid);
      consumer.softmax(s, p.scale_log2);
      consumer.accumulate_pv(s, stage_base(stage) + Tile::kElems);
    }

    ptx::cp_async_wait<0>();  // the next tile has landed (this thread's copies) ...
    __syncthreads();          // ... for every thread, and this stage is free again
    next_block = block_after;
    valid = valid_next;
  }

  Elem* out = static_cast<Elem*>(p.out) + sched.batch() * p.out_stride.batch +
              sched.head() * p.out_stride.head + q_row0 * p.out_stride.seq;
  float* lse = p.lse == nullptr
                   ? nullptr
                   : p.lse + (static_cast<std::int64_t>(sched.batch()) * p.heads + sched.head()) *
                                     (static_cast<std::int64_t>(p.num_q_blocks) * p.block) + q_row0;
  write_output(consumer, stage_base(0), out, p.out_stride.seq, lse);
}

template <class Elem, int kHeadDim>
void launch_fwd(const FwdKernelParams& p, int batch, cudaStream_t stream) {
  constexpr int kSmem = fwd_smem_bytes<Elem, kHeadDim>();
  static const cudaError_t attribute_status = cudaFuncSetAttribute(
      fwd_kernel<Elem, kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  check_cuda(attribute_status, "cudaFuncSetAttribute(fwd_kernel)");
  const dim3 grid(static_cast<unsigned>(p.num_q_blocks * (p.block / kTileRows)),
                  static_cast<unsigned>(p.heads), static_cast<unsigned>(batch));
  fwd_kernel<Elem, kHeadDim><<<grid, kFwdThreads, kSmem, stream>>>(p);
  check_launch("fwd_kernel (sm80)");
}

}  // namespace vsa::cuda::sm80
