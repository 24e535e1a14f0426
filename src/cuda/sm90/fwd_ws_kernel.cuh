// Hopper (sm_90a) block-sparse forward, third version: warp-specialized and
// persistent. v2's per-tile work (fwd_tile_math.cuh: the products, and the
// softmax of tile t under P·V of tile t−1) with the loads taken out of the
// consumers' way:
//
// - Roles. A CTA is one producer warpgroup and two consumer warpgroups. Each
//   consumer warpgroup owns one 64-row query tile at a time; producer warp c
//   (one thread) requests everything consumer c reads, by TMA, into that
//   consumer's ring. The producer warpgroup gives its registers to the
//   consumers (setmaxnreg: 56 and 224 per thread; at 40 the producer's loop
//   spilled).
// - Rings. Per consumer, two buffers each of Q, K and V, each with a "full"
//   barrier (the TMA bytes) and an "empty" one (one arrival per consumer warp
//   once its products have read the buffer). So K(t+1) and V(t+1) are
//   requested a whole tile ahead, no consumer thread issues or waits for a
//   copy except through a barrier, and no barrier spans more than one
//   warpgroup (v2 stopped its whole CTA twice per tile).
// - Persistent grid. One CTA per SM; consumer c of CTA b takes work items
//   2b + c, 2b + c + 2·grid, ... (an item is one query tile of one (batch,
//   head), heads outermost, so the CTAs resident at once share a head's K/V
//   in L2). The producer walks the same items, so the next item's Q and
//   first K/V tiles land while the current one finishes.
//
// Partial blocks as in v2: keys past vbs get P = 0, and the padding rows of a
// partial tile's V are zeroed by the consumer once it lands (then a fence and
// a barrier of that warpgroup, before its P·V).
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/launch.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/common/query_scheduler.cuh"
#include "cuda/sm80/fwd_epilogue.cuh"
#include "cuda/sm90/fwd_tile_math.cuh"
#include "cuda/sm90/swizzled_tile.cuh"
#include "cuda/sm90/tensor_maps.hpp"
#include "cuda/sm90/warp_roles.cuh"

namespace vsa::cuda::sm90 {

struct FwdWsParams {
  FwdTensorMaps maps;  // first: 64-byte aligned
  FwdKernelParams p;
  int num_items;       // query tiles × heads × batch
  int tiles_per_head;  // query tiles of one (batch, head)
};

constexpr int kWsConsumers = 2;  // consumer warpgroups per CTA
constexpr int kWsThreads = (1 + kWsConsumers) * kWarpgroupThreads;
// setmaxnreg only moves the registers the CTA got at launch (168 per thread at
// 384 threads): 56 + 2 · 224 = 3 · 168; a larger claim would never complete.
constexpr int kWsProducerRegisters = 56, kWsConsumerRegisters = 224;

// One consumer's ring in shared memory: two buffers each of Q, K and V, and a
// full and an empty barrier per buffer. A buffer's u-th use is stage u & 1,
// and its barriers flip once per use (tma.cuh).
template <int kHeadDim>
struct WsRing {
  enum Kind { kQ = 0, kK = 1, kV = 2 };
  static constexpr int kStages = 2;
  static constexpr int kTileBytes = 3 * kStages * SwizzledTile<kHeadDim>::kBytes;
  static constexpr int kBarrierBytes = 3 * kStages * 16;
  std::uint32_t tiles, barriers;  // tiles: 1024-byte aligned

  __device__ std::uint32_t tile(Kind kind, int use) const {
    return tiles + static_cast<std::uint32_t>(kind * kStages + (use & 1)) * SwizzledTile<kHeadDim>::kBytes;
  }
  __device__ std::uint32_t full(Kind kind, int use) const {
    return barriers + static_cast<std::uint32_t>(kind * kStages + (use & 1)) * 16;
  }
  __device__ std::uint32_t empty(Kind kind, int use) const { return full(kind, use) + 8; }
  __device__ static std::uint32_t parity(int use) { return static_cast<std::uint32_t>(use >> 1) & 1u; }
};

template <int kHeadDim>
constexpr int ws_smem_bytes() {
  return kWsConsumers * (WsRing<kHeadDim>::kTileBytes + WsRing<kHeadDim>::kBarrierBytes) + 1024;  // + alignment
}

__device__ __forceinline__ QueryScheduler<kTileRows> item_scheduler(const FwdWsParams& params, int item) {
  const int bh = item / params.tiles_per_head;
  return QueryScheduler<kTileRows>(params.p, bh / params.p.heads, bh % params.p.heads, item % params.tiles_per_head);
}

// The producer of one consumer's ring (one thread): each item's Q, then its
// K and V tiles in list order, each into a buffer as soon as the consumer
// has released it.
template <int kHeadDim>
__device__ void produce(const FwdWsParams& params, const WsRing<kHeadDim>& ring, int first_item, int item_stride) {
  using Ring = WsRing<kHeadDim>;
  const FwdTensorMaps& maps = params.maps;
  int q_use = 0, kv_use = 0;
  for (int item = first_item; item < params.num_items; item += item_stride, ++q_use) {
    const QueryScheduler<kTileRows> sched = item_scheduler(params, item);
    const int batch = sched.batch(), kv_head = sched.kv_head();
    mbarrier_wait(ring.empty(Ring::kQ, q_use), Ring::parity(q_use) ^ 1u);
    request_query_tile<kHeadDim>(ring.tile(Ring::kQ, q_use), ring.full(Ring::kQ, q_use), maps.q,
                                 sched.first_query_row(), sched.head(), batch);
    const int num_tiles = sched.num_tiles();
    for (int t = 0; t < num_tiles; ++t, ++kv_use) {
      const std::int64_t key = sched.first_key(t, sched.block_of(t));
      mbarrier_wait(ring.empty(Ring::kK, kv_use), Ring::parity(kv_use) ^ 1u);
      request_key_tile<kHeadDim>(ring.tile(Ring::kK, kv_use), ring.full(Ring::kK, kv_use), maps.k, key, kv_head,
                                 batch);
      mbarrier_wait(ring.empty(Ring::kV, kv_use), Ring::parity(kv_use) ^ 1u);
      request_key_tile<kHeadDim>(ring.tile(Ring::kV, kv_use), ring.full(Ring::kV, kv_use), maps.v, key, kv_head,
                                 batch);
    }
  }
}

// One consumer warpgroup: its items' tiles from its ring, each finished by the
// shared epilogue (O staged over the item's Q buffer). `barrier`: the named
// barrier of this warpgroup.
template <class Elem, int kHeadDim>
__device__ void consume(const FwdWsParams& params, const WsRing<kHeadDim>& ring, int first_item, int item_stride,
                        int barrier, unsigned char* smem) {
  using Ring = WsRing<kHeadDim>;
  const FwdKernelParams& p = params.p;
  const int thread = static_cast<int>(threadIdx.x) % kWarpgroupThreads;
  const int warp = thread / 32, lane = thread % 32;
  int q_use = 0, kv_use = 0;  // this item's first tile is the ring's kv_use-th K/V use
  for (int item = first_item; item < params.num_items; item += item_stride, ++q_use) {
    const QueryScheduler<kTileRows> sched = item_scheduler(params, item);
    // Read by the epilogue.
    sm80::prefetch_gate_rows<Elem, kHeadDim>(p, sched, thread, kWarpgroupThreads);
    const int num_tiles = sched.num_tiles();
    const std::uint32_t q = ring.tile(Ring::kQ, q_use);
    const auto k_of = [&](int t) { return ring.tile(Ring::kK, kv_use + t); };
    const auto v_of = [&](int t) { return ring.tile(Ring::kV, kv_use + t); };
    const auto wait_full = [&](typename Ring::Kind kind, int t) {
      mbarrier_wait(ring.full(kind, kv_use + t), Ring::parity(kv_use + t));
    };
    // This warp's products have read the buffer (its wgmma wait is behind it).
    const auto release = [&](typename Ring::Kind kind, int t) {
      if (lane == 0) mbarrier_arrive(ring.empty(kind, kv_use + t));
    };
    // Keys past vbs get P = 0, but 0 · NaN is NaN: the padding rows of a
    // partial tile's V are zeroed once it lands, and every warp's zeros are
    // visible to the async proxy before any warp issues its P·V.
    const auto clear_v_padding = [&](int t, int valid) {
      if (valid < kTileRows) {
        wait_full(Ring::kV, t);
        zero_rows<kHeadDim>(v_of(t), valid);
        fence_proxy_async();
        ptx::named_barrier_sync(barrier, kWarpgroupThreads);
      }
    };

    FwdTileMath<Elem, kHeadDim> math(warp);
    std::int64_t block = num_tiles > 0 ? sched.block_of(0) : 0;
    mbarrier_wait(ring.full(Ring::kQ, q_use), Ring::parity(q_use));  // also before O is staged over it
    if (num_tiles > 0) {  // tile 0: no product in flight yet
      const std::int64_t next_block = sched.block_of(1);
      wait_full(Ring::kK, 0);
      math.scores_waited(q, k_of(0));
      release(Ring::kK, 0);
      const int valid = sched.valid_keys(0, block);
      clear_v_padding(0, valid);
      math.softmax_into_p(valid, p.scale_log2, [] {});
      block = next_block;
    }
    for (int t = 1; t < num_tiles; ++t) {
      const int valid = sched.valid_keys(t, block);
      const std::int64_t next_block = sched.block_of(t + 1);
      wait_full(Ring::kK, t);
      wait_full(Ring::kV, t - 1);
      math.scores_under_pv(q, k_of(t), v_of(t - 1));
      release(Ring::kK, t);
      clear_v_padding(t, valid);
      math.softmax_into_p(valid, p.scale_log2, [&] {
        math.wait_pv();
        release(Ring::kV, t - 1);
      });
      block = next_block;
    }
    if (num_tiles > 0) {  // the last tile's P·V
      wait_full(Ring::kV, num_tiles - 1);
      math.pv_waited(v_of(num_tiles - 1));
      release(Ring::kV, num_tiles - 1);
    }
    ptx::named_barrier_sync(barrier, kWarpgroupThreads);  // every warp's products are done reading Q
    Elem* stage = reinterpret_cast<Elem*>(smem + (q - ptx::smem_addr(smem)));
    sm80::write_output(math.consumer, stage, cta_outputs<Elem, kHeadDim>(p, sched), sched.real_rows());
    fence_proxy_async();  // the staging's generic accesses, before the next TMA write of this buffer
    __syncwarp();
    if (lane == 0) mbarrier_arrive(ring.empty(Ring::kQ, q_use));
    kv_use += num_tiles;
  }
}

template <class Elem, int kHeadDim>
__global__ void __launch_bounds__(kWsThreads, 1) fwd_ws_kernel(const __grid_constant__ FwdWsParams params) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Ring = WsRing<kHeadDim>;
  extern __shared__ __align__(1024) unsigned char smem[];
  // The swizzle is applied to address bits, so tiles start on 1024 bytes.
  const std::uint32_t base = (ptx::smem_addr(smem) + 1023u) & ~1023u;
  const auto ring_of = [&](int consumer) {
    return Ring{base + static_cast<std::uint32_t>(consumer * Ring::kTileBytes),
                base + static_cast<std::uint32_t>(kWsConsumers * Ring::kTileBytes + consumer * Ring::kBarrierBytes)};
  };
  if (threadIdx.x == 0) {
    prefetch_tensor_map(params.maps.q);
    prefetch_tensor_map(params.maps.k);
    prefetch_tensor_map(params.maps.v);
    for (int c = 0; c < kWsConsumers; ++c)
      for (int kind = Ring::kQ; kind <= Ring::kV; ++kind)
        for (int use = 0; use < Ring::kStages; ++use) {
          mbarrier_init(ring_of(c).full(static_cast<typename Ring::Kind>(kind), use), 1);
          mbarrier_init(ring_of(c).empty(static_cast<typename Ring::Kind>(kind), use), kWarpgroupThreads / 32);
        }
    mbarrier_init_fence();
  }
  __syncthreads();  // the barriers are initialized before anyone waits on them

  const int role = static_cast<int>(threadIdx.x) / kWarpgroupThreads;  // 0: producer, c + 1: consumer c
  const int item_stride = static_cast<int>(gridDim.x) * kWsConsumers;
  if (role == 0) {
    release_registers<kWsProducerRegisters>();
    const int warp = static_cast<int>(threadIdx.x) / 32;
    if (warp < kWsConsumers && threadIdx.x % 32 == 0)
      produce<kHeadDim>(params, ring_of(warp), static_cast<int>(blockIdx.x) * kWsConsumers + warp, item_stride);
  } else {
    claim_registers<kWsConsumerRegisters>();
    const int consumer = role - 1;
    consume<Elem, kHeadDim>(params, ring_of(consumer), static_cast<int>(blockIdx.x) * kWsConsumers + consumer,
                            item_stride, 1 + consumer, smem);
  }
#else
  __trap();  // built only for sm_90a; dispatch never launches it elsewhere
#endif
}

// One CTA per SM, or fewer when there are fewer item pairs.
template <class Elem, int kHeadDim>
void launch_fwd_ws(const FwdKernelParams& p, const FwdTensorMaps& maps, int batch, int num_sms,
                   cudaStream_t stream) {
  const int tiles_per_head = p.num_q_blocks * (p.block / kTileRows);
  const FwdWsParams params{maps, p, tiles_per_head * p.heads * batch, tiles_per_head};
  if (params.num_items == 0) return;
  const int pairs = (params.num_items + kWsConsumers - 1) / kWsConsumers;
  launch_kernel<fwd_ws_kernel<Elem, kHeadDim>, ws_smem_bytes<kHeadDim>()>(
      dim3(static_cast<unsigned>(pairs < num_sms ? pairs : num_sms)), kWsThreads, stream, params,
      "fwd_ws_kernel (sm90)");
}

}  // namespace vsa::cuda::sm90
