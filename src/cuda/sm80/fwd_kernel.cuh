// The portable (sm_80+) block-sparse forward kernel: one CTA owns kCtaRows
// query rows, 32 per warp, and walks only the KV tiles its query block lists.
// kCtaRows is the block size (64 or 128): a 128-row block is one CTA of four
// warps, so each K/V tile brought into shared memory serves all 128 rows.
//
// Shared memory holds Q (resident: the warps read it at every tile), one K
// and one V tile: 48 KB (64 rows) or 64 KB (128 rows) at D = 128. K and V are
// pipelined against each other: V(t) lands while S = Q·K(t)ᵀ and the softmax
// run, K(t+1) while O += P·V(t) runs; the other resident CTAs cover what
// latency remains.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/launch.cuh"
#include "cuda/sm80/fwd_epilogue.cuh"
#include "cuda/common/query_scheduler.cuh"

namespace vsa::cuda::sm80 {

// One warp per 32 query rows.
template <int kCtaRows>
__host__ __device__ constexpr int fwd_threads() {
  return kCtaRows;
}

template <class Elem, int kHeadDim, int kCtaRows>
constexpr int fwd_smem_bytes() {
  return (kCtaRows + 2 * kTileRows) * kHeadDim * static_cast<int>(sizeof(Elem));  // Q, K, V
}

// Occupancy target: 8 warps per SM, two per scheduler, which caps registers
// at 255. Registers are split per scheduler, so a third warp per scheduler
// would cap them at 168: D = 128 needs ~200 for O and S alone, and D = 64
// spills there (measured slower than 8 warps without spills).
template <int kCtaRows>
constexpr int fwd_ctas_per_sm() {
  return 8 / (kCtaRows / 32);
}

template <class Elem, int kHeadDim, int kCtaRows>
__global__ void __launch_bounds__(fwd_threads<kCtaRows>(), fwd_ctas_per_sm<kCtaRows>())
    fwd_kernel(const __grid_constant__ FwdKernelParams p) {
  using Tile = SmemTile<Elem, kHeadDim>;
  using Consumer = FwdConsumer<Elem, kHeadDim>;
  constexpr int kThreads = fwd_threads<kCtaRows>();
  static_assert(kThreads / 32 * Consumer::kWarpRows == kCtaRows, "the warps cover the query tile");
  extern __shared__ __align__(128) unsigned char smem[];
  Elem* const sq = reinterpret_cast<Elem*>(smem);
  Elem* const sk = sq + kCtaRows * kHeadDim;
  Elem* const sv = sk + Tile::kElems;

  const QueryScheduler<kCtaRows> sched(p);
  // Read by the epilogue.
  prefetch_gate_rows<Elem, kHeadDim>(p, sched, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
  const auto [q, k, v] = cta_inputs<Elem>(p, sched);
  const int num_tiles = sched.num_tiles();

  load_tile_async<Elem, kHeadDim, kThreads, kCtaRows>(sq, q, p.q_stride.seq);
  const std::int64_t first_block = sched.block_of(0);
  std::int64_t key = sched.first_key(0, first_block);
  if (num_tiles > 0) load_tile_async<Elem, kHeadDim, kThreads>(sk, k + key * p.k_stride.seq, p.k_stride.seq);
  ptx::cp_async_commit();  // group: Q and K(0)
  std::int64_t next_block = sched.block_of(1);
  int valid = num_tiles > 0 ? sched.valid_keys(0, first_block) : 0;

  Consumer consumer(static_cast<int>(threadIdx.x) / 32);
  for (int t = 0; t < num_tiles; ++t) {
    ptx::cp_async_wait<0>();  // K(t) (and, at t = 0, Q) has landed for this thread ...
    __syncthreads();          // ... for every thread; and every warp is done with V(t-1)
    load_tile_async<Elem, kHeadDim, kThreads>(sv, v + key * p.v_stride.seq, p.v_stride.seq, valid);
    ptx::cp_async_commit();
    // Metadata of the next tile, loaded now and first used after the scores.
    const std::int64_t next_key = sched.first_key(t + 1, next_block);
    const int valid_next = t + 1 < num_tiles ? sched.valid_keys(t + 1, next_block) : 0;
    const std::int64_t block_after = sched.block_of(t + 2);

    typename Consumer::Scores s;
    if (valid > 0) {  // a tile of a block with vbs = 0 has nothing to attend
      consumer.scores(sq, sk, s);
      if (valid < kTileRows) consumer.mask_keys(s, valid);
      consumer.softmax(s, p.scale_log2);
    }

    ptx::cp_async_wait<0>();  // V(t) has landed ...
    __syncthreads();          // ... for every thread; and every warp is done with K(t)
    if (t + 1 < num_tiles)
      load_tile_async<Elem, kHeadDim, kThreads>(sk, k + next_key * p.k_stride.seq, p.k_stride.seq);
    ptx::cp_async_commit();
    if (valid > 0) consumer.accumulate_pv(s, sv);

    key = next_key;
    next_block = block_after;
    valid = valid_next;
  }
  if (num_tiles == 0) {  // Q (copied by every thread) still in flight: O is staged over it
    ptx::cp_async_wait<0>();
    __syncthreads();
  }

  write_output(consumer, sq, cta_outputs<Elem, kHeadDim>(p, sched), sched.real_rows());
}

template <class Elem, int kHeadDim, int kCtaRows>
void launch_fwd(const FwdKernelParams& p, int batch, cudaStream_t stream) {
  launch_kernel<fwd_kernel<Elem, kHeadDim, kCtaRows>, fwd_smem_bytes<Elem, kHeadDim, kCtaRows>()>(
      query_tile_grid<kCtaRows>(p, batch), fwd_threads<kCtaRows>(), stream, p, "fwd_kernel (sm80)");
}

}  // namespace vsa::cuda::sm80
