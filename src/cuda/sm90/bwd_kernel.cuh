// Hopper (sm_90a) block-sparse backward, key pass: one warpgroup per 64-key
// tile of one (batch, kv head), walking the query row tiles that attend to it
// (KeyScheduler), with every product on wgmma:
//
//   Sᵀ  = K·Qᵀ, dPᵀ = V·dOᵀ   m64n64, both operands from shared memory
//   dV += Pᵀ·dO, dK += dSᵀ·Q  m64nD, Pᵀ and dSᵀ as register A operands
//   dQ  = dS·K                 m64nD, dS read transposed from a shared dSᵀ
//                              tile, K as an MN-major operand (only with an
//                              accumulator)
//
// Without an accumulator (the stored-dS path) each warp stores its 16 keys'
// dSᵀ fragments from its registers into the workspace, in the order the dQ
// pass (bwd_dq_stored_kernel.cuh) reads them as its operand to sum dS·K
// (stored_ds_fragments.cuh).
//
// dQ reaches the fp32 accumulator through shared memory: the warpgroup
// stores its tile there (in the accumulator's own order, dq_accum.cuh) and
// one thread hands it to the TMA unit as one bulk reduction, which drains to
// L2 while the next pair is computed. (Reductions from registers held the
// next pair's first product until the SM's store path had read all 32 KB
// out of them: ptxas gives dQ the registers of Sᵀ and dPᵀ; the stall samples
// in docs/kernel-notes.md.)
//
// The elementwise step and the dSᵀ store are the portable kernel's (a warp
// of a warpgroup holds the m16n8 fragments of its 16 keys). Loads are
// cp.async into the 128-byte-swizzled layout, except on the stored-dS path a
// full query tile's Q and dO: warps 0 and 1 request them by TMA, a whole tile each, and the
// stage's mbarrier tells the warpgroup they have landed (partial tiles keep cp.async,
// which zero-fills their padding rows; measured −1 to −4 %, docs/kernel-notes.md,
// "Q and dO by TMA"). A pair's Q, dO, lse and delta
// share a stage, two stages in turn. Without dQ the next pair lands in the
// other stage while this one is computed. With dQ a pair's dQ tile takes
// its own stage's Q and dO space once dV and dK have read them, and stays
// there while it drains; the next pair's load into the other stage starts
// as soon as the previous tile has left it, while dV and dK are computed
// (before, one stage and one dQ tile: the load waited for dV and dK, and the
// next pair's first barrier for the load). Two CTAs per SM.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "cuda/common/key_scheduler.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/dq_accum.cuh"
#include "cuda/sm80/bwd_epilogue.cuh"
#include "cuda/sm80/bwd_gradients.cuh"
#include "cuda/sm90/bwd_pair_math.cuh"
#include "cuda/sm90/register_fragments.cuh"
#include "cuda/sm90/stored_ds_fragments.cuh"
#include "cuda/sm90/swizzled_tile.cuh"
#include "cuda/sm90/tensor_maps.hpp"
#include "cuda/sm90/tma.cuh"

namespace vsa::cuda::sm90 {

// The stored-dS key pass's arguments: its q and dout tensor maps (first: 64-byte aligned) and
// whether they could be encoded; full query tiles then come by TMA, one thread's request.
struct BwdStoredArgs {
  BwdQueryMaps maps;
  BwdKernelParams p;
  bool tma;
};
template <bool kStoreDs>
using BwdKeyPassArgs = std::conditional_t<kStoreDs, BwdStoredArgs, BwdKernelParams>;
__device__ __forceinline__ const BwdKernelParams& key_pass_params(const BwdKernelParams& p) { return p; }
__device__ __forceinline__ const BwdKernelParams& key_pass_params(const BwdStoredArgs& args) { return args.p; }

template <class Elem, int kHeadDim>
constexpr int bwd_smem_bytes() {
  // K, V and the atomic path's dSᵀ tile; two pair stages (1 KB apart), each holding its pair's
  // fp32 dQ tile in the end; alignment slack: 107 KB at D = 128, so two CTAs share an SM.
  return 2 * SwizzledTile<kHeadDim>::kBytes + SwizzledTile<kTileRows>::kBytes + 2 * (PairStage<kHeadDim>::kBytes + 1024) +
         1024;
}

// kStoreDs: the stored-dS path (p.ds_tiles set), a kernel of its own so that the
// others keep their registers.
template <class Elem, int kHeadDim, bool kMeanGrads, bool kStoreDs>
__global__ void __launch_bounds__(kWarpgroupThreads, 2)
    bwd_kernel(const __grid_constant__ BwdKeyPassArgs<kStoreDs> args) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const BwdKernelParams& p = key_pass_params(args);
  using Tile = SwizzledTile<kHeadDim>;
  constexpr bool kBf16 = ElemTraits<Elem>::kIsBf16;
  extern __shared__ __align__(1024) unsigned char smem[];
  // The swizzle is applied to address bits, so tiles start on 1024 bytes.
  const std::uint32_t smem0 = ptx::smem_addr(smem);
  const std::uint32_t sk = (smem0 + 1023u) & ~1023u, sv = sk + Tile::kBytes, sds = sv + Tile::kBytes;
  constexpr std::uint32_t kStageStride = (PairStage<kHeadDim>::kBytes + 1023u) & ~1023u;
  const std::uint32_t stage0 = sds + SwizzledTile<kTileRows>::kBytes;
  auto stage_of = [&](int index) { return PairStage<kHeadDim>(stage0 + static_cast<std::uint32_t>(index) * kStageStride); };
  auto generic = [&](std::uint32_t addr) { return smem + (addr - smem0); };
  // The stored-dS path's stage barriers, in the slack after each stage's stats: a stage's phase
  // completes once per use, by its TMA bytes and one arrival a warp (request_pair_tiles), or by
  // the warps' plain arrivals (a pair copied by cp.async).
  auto stage_barrier = [&](int index) { return stage_of(index).stats + PairStage<kHeadDim>::kStatsBytes; };
  // After stage 0's barrier, the scheduler's two 4-byte slots for the list entry after next.
  constexpr std::uint32_t kBarrierBytes = 8, kListSlotBytes = 8;
  const std::uint32_t list_slots = stage_barrier(0) + kBarrierBytes;
  static_assert(PairStage<kHeadDim>::kBytes + kBarrierBytes + kListSlotBytes <= kStageStride,
                "a stage's barrier and the list slots fit its slack");
  if constexpr (kStoreDs) {
    if (threadIdx.x == 0) {
      mbarrier_init(stage_barrier(0), kPairStageArrivals);
      mbarrier_init(stage_barrier(1), kPairStageArrivals);
      mbarrier_init_fence();
    }
    __syncthreads();
  }

  // Where a pair comes by TMA, each warp has one per-pair copy of its own: warps 0 and 1 request
  // the next pair's Q and dO (request_pair_tiles), warp 3 copies its stats, warp 2 the list
  // entry after next (thread 64). The dV/dK issue waits for the warpgroup's slowest warp.
  constexpr int kListCopyThread = 64;
  KeyScheduler sched(p, list_slots, kListCopyThread);
  const bool add_dq = !kStoreDs && p.dq_accum != nullptr;  // else the dQ pass computes dq ...
  constexpr bool store_ds = kStoreDs;                        // ... from the dSᵀ tiles stored here
  const int first_entry = store_ds ? stored_ds_first_entry(p) : 0;
  const bool bulk_thread = threadIdx.x == 0;  // issues and waits for the dQ tiles' reductions
  float* pending_dq = nullptr;                // the accumulator tile of the dQ tile staged last (pair n − 1)
  std::uint32_t pending_bytes = 0;            // its real rows' runs (padding rows are not added)
  const BwdKeyRows<Elem> keys = key_rows<Elem>(p, sched);
  const int valid = sched.valid_keys();
  // The stored path's stats copies of a pair by TMA: the last warp's source less the pair's row.
  const float* const stats_source = pair_stats_source(p);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  float dk[kHeadDim / 2], dv[kHeadDim / 2];
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) dk[i] = dv[i] = 0.0f;

  BwdPair pair{};
  int entry = 0;  // pair's KV->Q entry (the stored-dS path's tile)
  // The pair's real query rows (the rest of its tile is padding), handed out with it by the
  // scheduler and carried: looked up again after the pair's products, they were a global load
  // between the products' wait and the mask.
  int real_rows = 0;
  // A tile with no real keys has all-zero gradients.
  bool have = valid > 0 && sched.template next<true>(pair, entry, real_rows);
  if (have) {
    load_tile<Elem, kHeadDim>(sk, keys.k, p.k_stride.seq, valid);  // dQ += dS·K
    load_tile<Elem, kHeadDim>(sv, keys.v, p.v_stride.seq);
    load_pair<Elem, kHeadDim>(p, sched.batch(), pair, real_rows, stage_of(0));
  }
  if constexpr (kStoreDs)
    if (lane == 0) mbarrier_arrive(stage_barrier(0));  // the first pair comes by cp.async
  ptx::cp_async_commit();
  int n = 0;  // pairs done
  for (; have; ++n) {
    ptx::cp_async_wait<0>();  // this pair's stage (and K, V) written by this thread, the last dQ tile stored ...
    if constexpr (kStoreDs) mbarrier_wait(stage_barrier(n & 1), (n >> 1) & 1);  // ... or by TMA ...
    fence_proxy_async();      // ... visible to wgmma and the TMA unit ...
    __syncthreads();          // ... for every thread; every product of the last pair is done
    const PairStage<kHeadDim> stage = stage_of(n & 1), other = stage_of((n + 1) & 1);
    if (pending_dq != nullptr && bulk_thread) {  // the last pair's dQ tile, in the other stage
      bulk_reduce_add_f32(pending_dq, other.q, pending_bytes);
      bulk_commit();
    }
    sm80::BwdScores s, dp;
    issue_pair_scores<kBf16, kHeadDim>(sk, sv, stage, s, dp);
    // The next pair is found (list reads from global memory) while Sᵀ and dPᵀ are on the
    // tensor cores: before them, their latency was the start of every pair's chain.
    BwdPair next{};
    int next_entry = 0;
    int next_real_rows = 0;
    const bool have_next = sched.template next<true>(next, next_entry, next_real_rows);
    const auto load_next = [&] {
      if (have_next)
        load_pair<Elem, kHeadDim>(p, sched.batch(), next, next_real_rows, other);
      ptx::cp_async_commit();
    };
    if constexpr (kStoreDs) {  // the other stage is free: the next pair lands while this one is computed
      const bool by_tma = have_next && args.tma && next_real_rows == kTileRows;
      if (by_tma)  // by the last warp, which requests no tile
        load_pair_stats<kHeadDim, kWarpgroupThreads - 32>(stats_source, pair_stat_row(p, sched.batch(), next), other);
      else if (have_next)
        load_pair<Elem, kHeadDim>(p, sched.batch(), next, next_real_rows, other);
      ptx::cp_async_commit();
      if (lane == 0) {
        const std::uint32_t bar = stage_barrier((n + 1) & 1);
        if (by_tma)
          request_pair_tiles<kHeadDim>(other, bar, args.maps, next.row0, next.head, sched.batch(), warp);
        else
          mbarrier_arrive(bar);
      }
    } else if (!add_dq) {
      load_next();
    }
    const float* s_lse = reinterpret_cast<const float*>(generic(stage.stats));
    const float* s_delta = s_lse + kTileRows;
    finish_pair_scores(s, dp);

    sm80::scores_to_gradients(s, dp, s_lse, s_delta, p.scale_log2, valid, 16 * warp, 0, lane, real_rows);
    std::uint32_t pa[kTileRows / 16][4], dsa[kTileRows / 16][4];
    pack_a<Elem>(s, pa);
    pack_a<Elem>(dp, dsa);
    if (add_dq) {
      sm80::store_key_rows<Elem, false>(reinterpret_cast<Elem*>(generic(sds)), dp, 16 * warp, 0, lane);
      fence_proxy_async();  // the dSᵀ stores, for the dQ product's reads
    }
    issue_key_grads<kBf16, kHeadDim>(dv, dk, pa, dsa, stage);
    if constexpr (store_ds) {
      // The warp's dSᵀ fragments, straight from the registers that feed dK, in the dQ pass's
      // operand order (stored_ds_fragments.cuh). The product only reads them, so they are
      // stored while it runs (before its issue, their addresses and stores were the last steps
      // of the pair's chain). A warp of padding keys only stores nothing, as the dQ pass reads
      // a tile's real keys' steps only.
      if (16 * warp < valid)
        store_ds_fragments(p.ds_tiles + sched.stored_tile(pair, entry, first_entry) * kStoredDsTileBytes, dsa, warp,
                           lane);
    }
    if (add_dq) {  // while dV and dK are computed
      if (bulk_thread) bulk_wait_read<0>();  // the last dQ tile has left the other stage ...
      __syncthreads();                       // ... for every thread; dSᵀ is whole
      load_next();
    }
    wgmma_wait<0>();
    fence_registers(dv);
    fence_registers(dk);

    if (add_dq) {
      float dq[kHeadDim / 2];
      pair_dq<kBf16, kHeadDim>(dq, sds, sk);
      __syncthreads();  // every warp's dV and dK products have read this stage's Q and dO
      stage_dq_tile<kHeadDim>(stage.q, dq, static_cast<int>(threadIdx.x));
      // Reduced once the next pair starts; a tile of padding rows only (none in a real layer) is not.
      pending_bytes = dq_rows_floats<kHeadDim>(real_rows) * sizeof(float);
      pending_dq = pending_bytes > 0 ? pair_rows<Elem, kHeadDim>(p, sched.batch(), pair).dq_accum : nullptr;
    }

    pair = next;
    entry = next_entry;
    real_rows = next_real_rows;
    have = have_next;
  }
  if (pending_dq != nullptr) {  // the last pair's dQ tile, in stage (n − 1) & 1
    fence_proxy_async();
    __syncthreads();
    if (bulk_thread) {
      bulk_reduce_add_f32(pending_dq, stage_of((n + 1) & 1).q, pending_bytes);
      bulk_commit();
    }
  }
  // Every reduction done before the CTA leaves (also when the last pair's tile, all padding
  // rows, was not reduced while an earlier one may still be in flight).
  if (!store_ds && bulk_thread) bulk_wait_all();
  // The last pair (n - 1) issued no copy, and every warp is done with the
  // stage n & 1: without dQ, free since the barrier at that pair's start;
  // with dQ, its tile (pair n − 2) left it before the barrier that pair n − 1
  // met after issuing dV and dK. Each warp stages only its own 16 rows there
  // (generic [64][D] layout, as the sm80 tiles). Without pairs, nothing was
  // copied at all.
  using Grad = float[1][kHeadDim / 8][4];
  const PairStage<kHeadDim> spare = stage_of(n & 1);
  sm80::write_warp_rows<Elem, kHeadDim>(reinterpret_cast<const Grad&>(dk), p.scale, warp, lane,
                                        reinterpret_cast<Elem*>(generic(spare.q)), keys.dk, p.dk_stride.seq,
                                        kTileRows, key_mean_grad_rows<kMeanGrads>(p, p.dk_mean, sched, kHeadDim));
  sm80::write_warp_rows<Elem, kHeadDim>(reinterpret_cast<const Grad&>(dv), 1.0f, warp, lane,
                                        reinterpret_cast<Elem*>(generic(spare.dout)), keys.dv, p.dv_stride.seq,
                                        kTileRows, key_mean_grad_rows<kMeanGrads>(p, p.dv_mean, sched, kHeadDim));
#else
  __trap();  // built only for sm_90a; dispatch never launches it elsewhere
#endif
}

template <class Elem, int kHeadDim>
void launch_bwd(const BwdKernelParams& p, int num_kv_tiles, int units, cudaStream_t stream) {
  with_mean_grads(p.dk_mean != nullptr || p.dv_mean != nullptr, [&](auto mean_grads) {
    constexpr bool kMeanGrads = decltype(mean_grads)::value;
    if (p.ds_tiles != nullptr) {
      BwdStoredArgs args{};
      args.p = p;
      const int kv_heads = p.heads / p.kv_group;
      const int batches = (p.ds_first_unit + units - 1) / kv_heads + 1;  // up to the group's last batch
      args.tma = encode_bwd_query_maps(p, std::is_same_v<Elem, __nv_bfloat16>, batches, kHeadDim, args.maps);
      launch_kernel<bwd_kernel<Elem, kHeadDim, kMeanGrads, true>, bwd_smem_bytes<Elem, kHeadDim>()>(
          key_tile_grid(num_kv_tiles, units), kWarpgroupThreads, stream, args, "bwd_kernel (sm90, dS stored)");
    } else {
      launch_kernel<bwd_kernel<Elem, kHeadDim, kMeanGrads, false>, bwd_smem_bytes<Elem, kHeadDim>()>(
          key_tile_grid(num_kv_tiles, units), kWarpgroupThreads, stream, p, "bwd_kernel (sm90)");
    }
  });
}

}  // namespace vsa::cuda::sm90
