// Hopper (sm_90a) block-sparse forward for 128-token blocks: one CTA per
// 128-row query block, whose two consumer warpgroups (64 rows each) read
// every listed K and V block from one shared ring, filled by TMA from a
// producer warp. v2 loads each K/V block once per 64-row query tile; here
// once per 128-row block, half the L2 → SM bytes per FLOP, which is what
// bounds v2 (docs/kernel-notes.md, "What bounds the forward").
//
// - Roles. One producer warpgroup (its first thread requests every tile; it
//   gives its registers to the consumers: setmaxnreg 24 and 240) and two
//   consumer warpgroups.
// - Steps of a whole block: each consumer's S = Q·Kᵀ is m64n128 (K as one
//   [128 keys][D] tile) and its O += P·V runs over 128 keys, with v2's
//   overlap (fwd_tile_math.cuh: the softmax of block j under P·V of j − 1).
// - Ring. Two stages of K and of V (32 KB each at D = 128), each with a
//   "full" barrier (the TMA bytes) and an "empty" one (an arrival per consumer
//   warp once its products have read it), so block j + 1 lands under block j.
//   Q of both consumers: 32 KB. 160 KB at D = 128, one CTA per SM.
// - Partial blocks: keys past vbs get P = 0; the padding rows of the shared V
//   tile are zeroed once by the first consumer, and both consumers pass a
//   named barrier before either issues that block's P·V (0 · NaN is NaN).
// - Ping-pong (FA3's schedule): the two consumers issue their products in
//   turns, so one's softmax runs while the other's products hold the tensor
//   cores (measured 1-3 % faster than issuing in any order; kernel-notes).
// - Head dim 128 only: at D = 64, v2 is faster (kernel-notes).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/launch.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/common/query_scheduler.cuh"
#include "cuda/sm80/fwd_epilogue.cuh"
#include "cuda/sm90/fwd_tile_math.cuh"
#include "cuda/sm90/swizzled_tile.cuh"
#include "cuda/sm90/tensor_maps.hpp"
#include "cuda/sm90/warp_roles.cuh"

namespace vsa::cuda::sm90 {

struct FwdPairParams {
  FwdTensorMaps maps;  // first: 64-byte aligned
  FwdKernelParams p;
};

constexpr int kPairBlock = 2 * kTileRows;  // the block size this kernel runs
constexpr int kPairConsumers = 2;           // consumer warpgroups, one per 64 query rows
constexpr int kPairThreads = (1 + kPairConsumers) * kWarpgroupThreads;
// setmaxnreg only moves the registers the CTA got at launch: 168 per thread
// at 384 threads (launch bounds 384, 1), 3 · 168 = 504 per thread slot. A
// claim beyond that never completes (the kernel would hang).
constexpr int kPairLaunchRegisters = 168;
constexpr int kPairProducerRegisters = 24, kPairConsumerRegisters = 240;
static_assert(kPairProducerRegisters + kPairConsumers * kPairConsumerRegisters <=
                  (1 + kPairConsumers) * kPairLaunchRegisters,
              "the register split fits the CTA's launch allocation");
// Named barriers: both consumers (V padding); consumer c alone (2 + c); consumer c's turn (4 + c).
constexpr int kPairBothConsumersBarrier = 1, kPairConsumerBarrier = 2, kPairTurnBarrier = 4;

// Ping-pong turns: consumer c waits at its turn barrier before issuing a
// block's products (take) and arrives at the other's once they are issued
// (pass). Consumer 1 arrives at consumer 0's once before its first turn, so
// consumer 0 goes first, and not after its last products, so no arrival is
// left over at exit (both walk the same list: the same number of turns).
struct PairTurns {
  int consumer;
  bool last;  // the block's last products
  __device__ void take() const {
    ptx::named_barrier_sync(kPairTurnBarrier + consumer, kPairConsumers * kWarpgroupThreads);
  }
  __device__ void pass() const {
    if (consumer == 0 || !last)
      ptx::named_barrier_arrive(kPairTurnBarrier + 1 - consumer, kPairConsumers * kWarpgroupThreads);
  }
};

// Where the CTA's tiles and barriers sit in shared memory. The u-th use of
// the ring is stage u & 1; its barriers flip once per use (tma.cuh).
template <int kHeadDim>
struct PairSmem {
  using QTile = SwizzledTile<kHeadDim>;
  using KvTile = SwizzledTile<kHeadDim, kPairBlock>;
  static constexpr int kStages = 2;
  static constexpr int kQBytes = kPairConsumers * QTile::kBytes;
  static constexpr int kRingBytes = 2 * kStages * KvTile::kBytes;
  static constexpr int kBarriers = 1 + 4 * kStages;  // Q's full; K's and V's full and empty per stage
  static constexpr int kBytes = kQBytes + kRingBytes + 8 * kBarriers + 1024;  // + alignment slack
  std::uint32_t base;  // 1024-byte aligned

  __device__ std::uint32_t q(int consumer) const { return base + static_cast<std::uint32_t>(consumer) * QTile::kBytes; }
  __device__ std::uint32_t k(int use) const { return base + kQBytes + static_cast<std::uint32_t>(use & 1) * KvTile::kBytes; }
  __device__ std::uint32_t v(int use) const { return k(use) + kStages * KvTile::kBytes; }
  __device__ std::uint32_t q_full() const { return base + kQBytes + kRingBytes; }
  __device__ std::uint32_t k_full(int use) const { return q_full() + 8 * (1 + (use & 1)); }
  __device__ std::uint32_t v_full(int use) const { return q_full() + 8 * (3 + (use & 1)); }
  __device__ std::uint32_t k_empty(int use) const { return q_full() + 8 * (5 + (use & 1)); }
  __device__ std::uint32_t v_empty(int use) const { return q_full() + 8 * (7 + (use & 1)); }
  __device__ static std::uint32_t parity(int use) { return static_cast<std::uint32_t>(use >> 1) & 1u; }
};

// Consumer c's 64-row query tile; both tiles of a block walk the same list
// (the block's), in 64-key tiles, two per block.
__device__ __forceinline__ QueryScheduler<kTileRows> pair_scheduler(const FwdKernelParams& p, int consumer) {
  return QueryScheduler<kTileRows>(p, static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y),
                                   kPairConsumers * static_cast<int>(blockIdx.x) + consumer);
}

// The producer (one thread): both Q tiles, then each listed block's K and V
// as soon as the consumers have released the stage.
template <int kHeadDim>
__device__ void produce_pair(const FwdPairParams& params, const PairSmem<kHeadDim>& buf) {
  const FwdTensorMaps& maps = params.maps;
  const QueryScheduler<kTileRows> sched = pair_scheduler(params.p, 0);
  const int batch = sched.batch(), kv_head = sched.kv_head();
  for (int c = 0; c < kPairConsumers; ++c)
    request_query_tile<kHeadDim>(buf.q(c), buf.q_full(), maps.q, sched.first_query_row() + c * kTileRows,
                                 sched.head(), batch);
  const int blocks = sched.num_tiles() / 2;
  for (int j = 0; j < blocks; ++j) {
    const std::int64_t key = sched.first_key(2 * j, sched.block_of(2 * j));
    mbarrier_wait(buf.k_empty(j), PairSmem<kHeadDim>::parity(j) ^ 1u);
    request_key_tile<kHeadDim, kPairBlock>(buf.k(j), buf.k_full(j), maps.k, key, kv_head, batch);
    mbarrier_wait(buf.v_empty(j), PairSmem<kHeadDim>::parity(j) ^ 1u);
    request_key_tile<kHeadDim, kPairBlock>(buf.v(j), buf.v_full(j), maps.v, key, kv_head, batch);
  }
}

// Consumer warpgroup c: its 64 rows against every listed block, then the
// shared epilogue (O staged over its Q tile).
template <class Elem, int kHeadDim>
__device__ void consume_pair(const FwdPairParams& params, const PairSmem<kHeadDim>& buf, int c, unsigned char* smem) {
  using Smem = PairSmem<kHeadDim>;
  const FwdKernelParams& p = params.p;
  const int thread = static_cast<int>(threadIdx.x) % kWarpgroupThreads;
  const int warp = thread / 32, lane = thread % 32;
  const QueryScheduler<kTileRows> sched = pair_scheduler(p, c);
  sm80::prefetch_gate_rows<Elem, kHeadDim>(p, sched, thread, kWarpgroupThreads);  // read by the epilogue
  const int blocks = sched.num_tiles() / 2;
  const std::uint32_t q = buf.q(c);
  // Real keys of block j: its two 64-key tiles' counts.
  const auto valid_keys = [&](int j, std::int64_t block) {
    return sched.valid_keys(2 * j, block) + sched.valid_keys(2 * j + 1, block);
  };
  // This warp's products have read the buffer (its wgmma wait is behind it).
  const auto release = [&](std::uint32_t empty) {
    if (lane == 0) mbarrier_arrive(empty);
  };
  const auto clear_v_padding = [&](int j, int valid) {
    if (valid < kPairBlock) {
      if (c == 0) {  // the other consumer waits for V at its P·V
        mbarrier_wait(buf.v_full(j), Smem::parity(j));
        zero_rows<kHeadDim, kPairBlock>(buf.v(j), valid);
      }
      fence_proxy_async();
      ptx::named_barrier_sync(kPairBothConsumersBarrier, kPairConsumers * kWarpgroupThreads);
    }
  };

  if (c == 1 && blocks > 0) ptx::named_barrier_arrive(kPairTurnBarrier, kPairConsumers * kWarpgroupThreads);

  FwdTileMath<Elem, kHeadDim, kPairBlock> math(warp);
  // The lookups run ahead of the products: block j's real keys are loaded
  // while block j − 1 is computed, from the list entry loaded during block
  // j − 2, so no load's latency sits between one block's products and the
  // next (past the list's end block_of gives 0, whose vbs is never used).
  std::int64_t next_block = sched.block_of(2);  // block 1
  int valid = blocks > 0 ? valid_keys(0, sched.block_of(0)) : 0;
  mbarrier_wait(buf.q_full(), 0);  // also before O is staged over Q, with no blocks
  if (blocks > 0) {  // block 0: no product in flight yet
    const int next_valid = valid_keys(1, next_block);
    next_block = sched.block_of(4);
    mbarrier_wait(buf.k_full(0), Smem::parity(0));
    math.scores_waited(q, buf.k(0), PairTurns{c, false});
    release(buf.k_empty(0));
    clear_v_padding(0, valid);
    math.softmax_into_p(valid, p.scale_log2, [] {});
    valid = next_valid;
  }
  for (int j = 1; j < blocks; ++j) {
    const int next_valid = valid_keys(j + 1, next_block);
    next_block = sched.block_of(2 * j + 4);
    mbarrier_wait(buf.k_full(j), Smem::parity(j));
    mbarrier_wait(buf.v_full(j - 1), Smem::parity(j - 1));
    math.scores_under_pv(q, buf.k(j), buf.v(j - 1), PairTurns{c, false});
    release(buf.k_empty(j));
    clear_v_padding(j, valid);
    math.softmax_into_p(valid, p.scale_log2, [&] {
      math.wait_pv();
      release(buf.v_empty(j - 1));
    });
    valid = next_valid;
  }
  if (blocks > 0) {  // the last block's P·V
    mbarrier_wait(buf.v_full(blocks - 1), Smem::parity(blocks - 1));
    math.pv_waited(buf.v(blocks - 1), PairTurns{c, true});
    release(buf.v_empty(blocks - 1));
  }
  ptx::named_barrier_sync(kPairConsumerBarrier + c, kWarpgroupThreads);  // every warp's products are done reading Q
  Elem* stage = reinterpret_cast<Elem*>(smem + (q - ptx::smem_addr(smem)));
  sm80::write_output(math.consumer, stage, cta_outputs<Elem, kHeadDim>(p, sched), sched.real_rows());
}

template <class Elem, int kHeadDim>
__global__ void __launch_bounds__(kPairThreads, 1) fwd_pair_kernel(const __grid_constant__ FwdPairParams params) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem[];
  // The swizzle is applied to address bits, so tiles start on 1024 bytes.
  const PairSmem<kHeadDim> buf{(ptx::smem_addr(smem) + 1023u) & ~1023u};
  if (threadIdx.x == 0) {
    prefetch_tensor_map(params.maps.q);
    prefetch_tensor_map(params.maps.k);
    prefetch_tensor_map(params.maps.v);
    mbarrier_init(buf.q_full(), kPairConsumers);  // one announcing arrival per Q tile
    for (int use = 0; use < PairSmem<kHeadDim>::kStages; ++use) {
      mbarrier_init(buf.k_full(use), 1);
      mbarrier_init(buf.v_full(use), 1);
      mbarrier_init(buf.k_empty(use), kPairConsumers * kWarpgroupThreads / 32);
      mbarrier_init(buf.v_empty(use), kPairConsumers * kWarpgroupThreads / 32);
    }
    mbarrier_init_fence();
  }
  __syncthreads();  // the barriers are initialized before anyone waits on them

  const int role = static_cast<int>(threadIdx.x) / kWarpgroupThreads;  // 0: producer, c + 1: consumer c
  if (role == 0) {
    release_registers<kPairProducerRegisters>();
    if (threadIdx.x == 0) produce_pair<kHeadDim>(params, buf);
  } else {
    claim_registers<kPairConsumerRegisters>();
    consume_pair<Elem, kHeadDim>(params, buf, role - 1, smem);
  }
#else
  __trap();  // built only for sm_90a; dispatch never launches it elsewhere
#endif
}

template <class Elem, int kHeadDim>
void launch_fwd_pair(const FwdKernelParams& p, const FwdTensorMaps& maps, int batch, cudaStream_t stream) {
  launch_kernel<fwd_pair_kernel<Elem, kHeadDim>, PairSmem<kHeadDim>::kBytes>(
      query_tile_grid<kPairBlock>(p, batch), kPairThreads, stream, FwdPairParams{maps, p}, "fwd_pair_kernel (sm90)");
}

}  // namespace vsa::cuda::sm90
