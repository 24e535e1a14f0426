// Hopper (sm_90a) block-sparse forward, second version: the first version's
// warpgroup and products (fwd_kernel.cuh), with the tiles brought in by the
// TMA unit.
//
// Loads: one thread (the producer role, thread 0) requests each Q, K and V
// tile as TMA boxes at the coordinates of the listed block, completing on a
// per-buffer mbarrier; the four warps (the consumer role) wait on that
// barrier. No thread moves data: thread 0 only issues the requests, and no
// CTA barrier waits for a copy (v1's threads copied with cp.async and waited
// for their copies at two CTA barriers per tile).
//
// The walk: in list order, or, on a long launch over heads whose K and V
// are larger than half of L2, from a place set by the CTA's place in the
// launch, so that the CTAs resident at once read one window of their head
// (list_walk.cuh; kernel_choice.hpp decides).
//
// Partial blocks: a tile of `valid` < 64 real keys is requested from 64 −
// valid rows before its first key (request_key_tile), so its real keys land
// in its last rows and its first rows are the box's out-of-bounds rows,
// which the TMA unit fills with zeros without reading memory. The keys there
// get P = 0 (mask_keys_before) against V rows that are exactly 0, whatever
// the caller's padding holds (0 · NaN would be NaN), and no thread touches
// the tile. A block with vbs = 0 is one whole box of zeros.
//
// At D = 64 a tile of at most 32 (16) real keys is multiplied over the last
// 32 (16) rows of its K and V tiles only (fwd_tile_math.cuh): the products
// and the softmax of a partial block shrink with its keys. At D = 128 the
// kernel holds 128 registers for its four CTAs per SM, and with the narrow
// steps beside the whole ones ptxas spilled and serialized the products.
//
// Loop order: S(t) = Q·K(t)ᵀ, the softmax of tile t, O += P(t)·V(t), each
// product waited for (ThunderKittens' order), so a warp holds no product in
// flight during its softmax and needs 128 registers: four CTAs per SM at
// both head dims, whose warps hide each other's latency. K(t+1) is requested
// as soon as S(t) has read K(t) (it lands under the softmax and P·V), V(t+1)
// as soon as P·V(t) has read V(t); Q, K and V: 48 KB at D = 128. Overlapping
// the softmax with P·V(t−1) instead (FA3's order, v2 until 2026-12-02) needs
// two V buffers and 158 registers, three CTAs per SM at D = 128, and was
// 2-6 % slower on every shape measured (docs/kernel-notes.md).
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/launch.cuh"
#include "cuda/common/list_walk.cuh"
#include "cuda/common/query_scheduler.cuh"
#include "cuda/sm80/fwd_epilogue.cuh"
#include "cuda/sm90/fwd_launch.hpp"
#include "cuda/sm90/fwd_tile_math.cuh"
#include "cuda/sm90/swizzled_tile.cuh"
#include "cuda/sm90/tensor_maps.hpp"

namespace vsa::cuda::sm90 {

struct FwdTmaParams {
  FwdTensorMaps maps;  // first: 64-byte aligned
  FwdKernelParams p;
};

constexpr int kTmaFwdThreads = kWarpgroupThreads;

// Where a CTA's tiles (Q, K, V) and their barriers sit in shared memory.
// The K and V buffers take tile t on their fill t, so a waiter passes t & 1.
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

template <class Elem, int kHeadDim>
__global__ void __launch_bounds__(kTmaFwdThreads, kTmaFwdCtasPerSm)
    fwd_tma_kernel(const __grid_constant__ FwdTmaParams params) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const FwdKernelParams& p = params.p;
  const FwdTensorMaps& maps = params.maps;
  extern __shared__ __align__(1024) unsigned char smem[];
  // The swizzle is applied to address bits, so tiles start on 1024 bytes.
  const FwdTmaSmem<kHeadDim> buf((ptx::smem_addr(smem) + 1023u) & ~1023u);
  const bool producer = threadIdx.x == 0;

  const QueryScheduler<kTileRows> sched(p);
  // Read by the epilogue.
  sm80::prefetch_gate_rows<Elem, kHeadDim>(p, sched, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
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

  // Step j of the walk: the first key of its tile's block part and its real
  // keys (two dependent loads, issued a step before the requests that use them).
  struct KeyTile {
    std::int64_t key;
    int valid;
  };
  const ListWalk walk(p.walk_sms * kTmaFwdCtasPerSm, p.walk_ramp_waves, num_tiles);
  const auto key_tile = [&](int step) {
    const int j = walk.tile_at(step);
    const std::int64_t block = sched.block_of(j);
    return KeyTile{sched.first_key(j, block), sched.valid_keys(j, block)};
  };
  const auto request_k = [&](const KeyTile& tile) {
    request_key_tile<kHeadDim>(buf.k, buf.k_full, maps.k, tile.key, kv_head, batch, kTileRows - tile.valid);
  };
  const auto request_v = [&](const KeyTile& tile) {
    request_key_tile<kHeadDim>(buf.v, buf.v_full, maps.v, tile.key, kv_head, batch, kTileRows - tile.valid);
  };
  KeyTile tile = key_tile(0);  // with no tiles: block 0 (block_of), never used
  if (producer) {  // Q, K(0), V(0)
    request_query_tile<kHeadDim>(buf.q, buf.q_full, maps.q, sched.first_query_row(), sched.head(), batch);
    if (num_tiles > 0) {
      request_k(tile);
      request_v(tile);
    }
  }

  FwdTileMath<Elem, kHeadDim, kTileRows, true, false> math(static_cast<int>(threadIdx.x) / 32);
  mbarrier_wait(buf.q_full, 0);  // also before the epilogue stages O over Q, with no tiles
  for (int t = 0; t < num_tiles; ++t) {
    const KeyTile next = key_tile(t + 1);
    const std::uint32_t parity = static_cast<std::uint32_t>(t) & 1u;
    // Tile t's steps over the last kWidth rows of its K and V tiles, where its real keys are.
    const auto steps = [&](auto width) {
      constexpr int kWidth = decltype(width)::value;
      mbarrier_wait(buf.k_full, parity);
      math.template scores_waited<kWidth>(buf.q, buf.k);
      __syncthreads();  // every warp's S(t) has read K(t): the buffer takes K(t+1)
      if (producer && t + 1 < num_tiles) request_k(next);
      math.template softmax_into_p<kWidth>(tile.valid, p.scale_log2, [] {});
      mbarrier_wait(buf.v_full, parity);
      math.template pv_waited<kWidth>(buf.v);
      __syncthreads();  // every warp's P·V(t) has read V(t): the buffer takes V(t+1)
      if (producer && t + 1 < num_tiles) request_v(next);
    };
    if constexpr (kHeadDim == 64)
      with_tile_width(tile.valid, steps);
    else  // 128 registers at D = 128 (four CTAs per SM): a second shape of S spilled and serialized
      steps(std::integral_constant<int, kTileRows>{});
    tile = next;
  }
  __syncthreads();  // every warp's products are done reading Q and V
  // Every product that read Q is done (the loop's barriers, or no tiles), and
  // every requested tile has landed: the epilogue stages O over Q.
  Elem* stage = reinterpret_cast<Elem*>(smem + (buf.q - ptx::smem_addr(smem)));
  sm80::write_output(math.consumer, stage, cta_outputs<Elem, kHeadDim>(p, sched), sched.real_rows());
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
