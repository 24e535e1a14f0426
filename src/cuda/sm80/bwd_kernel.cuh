// The portable (sm_80+) block-sparse backward, key pass: a CTA of four warps
// owns one 64-key tile of one (batch, kv head), walks the query row tiles
// that attend to it (the inverted lists, KeyScheduler), keeps the tile's dK
// and dV in registers and writes them once. dS·K is added into a dQ
// accumulator (a row pass turns it into dq afterwards, backward/row_passes.cu),
// or, with kStoreDs, each warp copies the chunks of the dSᵀ tile it wrote into
// the workspace and a dQ pass sums dq from them (bwd_dq_stored_kernel.cuh).
//
// Shared memory: K and V (resident), the Pᵀ and dSᵀ tiles, and one or two
// stages of a query tile's Q, dO, lse and delta. With one stage (81 KB at
// D = 128, so it launches on every GPU from sm_80 on, the 99 KB of
// sm_86/89/120 included, two CTAs per SM on sm_80 and sm_90) the next pair's
// Q/dO land while this pair's dQ = dS·K runs and its sums go out, after a CTA
// barrier; with two (113 KB), where two CTAs still fit (query_stages), they
// are requested earlier and that barrier goes.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/key_scheduler.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/sm80/bwd_epilogue.cuh"

namespace vsa::cuda::sm80 {

// A query tile's shared tiles: Q and dO rows, lse and delta.
template <class Elem>
struct PairTiles {
  Elem* q;
  Elem* dout;
  float* lse;
  float* delta;
};

template <class Elem, int kHeadDim>
__host__ __device__ constexpr int pair_tiles_bytes() {
  return 2 * kTileRows * kHeadDim * static_cast<int>(sizeof(Elem)) + 2 * kTileRows * static_cast<int>(sizeof(float));
}

template <class Elem, int kHeadDim, int kStages>
constexpr int bwd_smem_bytes() {
  // K, V tiles; the Pᵀ and dSᵀ tiles; the query tiles of each stage.
  return (2 * kTileRows * kHeadDim + 2 * kTileRows * kTileRows) * static_cast<int>(sizeof(Elem)) +
         kStages * pair_tiles_bytes<Elem, kHeadDim>();
}

// Where a pair's rows start: its head's rows (q, dout, and the index of its first lse, delta and
// dQ accumulator row) plus the pair's first row. The head's part costs three 64-bit products
// per tensor and changes only when the walk moves on to the next query head of a GQA group, so
// it is kept across pairs instead of recomputed for each.
template <class Elem, int kHeadDim>
class PairRowsCache {
 public:
  __device__ BwdPairRows<Elem> rows(const BwdKernelParams& p, int batch, const BwdPair& pair) {
    if (pair.head != head_) {
      head_ = pair.head;
      q_ = static_cast<const Elem*>(p.q) + batch * p.q_stride.batch + head_ * p.q_stride.head;
      dout_ = static_cast<const Elem*>(p.dout) + batch * p.dout_stride.batch + head_ * p.dout_stride.head;
      stat_ = (static_cast<std::int64_t>(batch) * p.heads + head_) * p.seq_q;
    }
    const std::int64_t stat = stat_ + pair.row0;
    return {q_ + pair.row0 * p.q_stride.seq, dout_ + pair.row0 * p.dout_stride.seq, p.lse + stat, p.delta + stat,
            p.dq_accum + stat * kHeadDim};
  }

 private:
  int head_ = -1;
  const Elem* q_ = nullptr;
  const Elem* dout_ = nullptr;
  std::int64_t stat_ = 0;
};

// Q and dO rows of a pair, and its 64 lse and delta values (16-byte chunks,
// copied by the first 32 threads). Padding query rows (from `real_rows` on)
// are zero-filled, not read: their P and dS are 0 by the mask.
template <class Elem, int kHeadDim>
__device__ __forceinline__ void load_pair(const BwdPairRows<Elem>& rows, int real_rows, const BwdKernelParams& p,
                                          const PairTiles<Elem>& into) {
  load_tile_async<Elem, kHeadDim, kBwdThreads>(into.q, rows.q, p.q_stride.seq, real_rows);
  load_tile_async<Elem, kHeadDim, kBwdThreads>(into.dout, rows.dout, p.dout_stride.seq, real_rows);
  const int t = static_cast<int>(threadIdx.x);
  constexpr int kChunks = kTileRows / 4;
  if (t < kChunks)
    ptx::cp_async_16(ptx::smem_addr(into.lse + 4 * t), rows.lse + 4 * t);
  else if (t < 2 * kChunks)
    ptx::cp_async_16(ptx::smem_addr(into.delta + 4 * (t - kChunks)), rows.delta + 4 * (t - kChunks));
}

// kStages = 2: the next pair's query tiles land in the other stage while this
// pair is computed: requested at its start on the stored-dS path, which has no
// dQ product to hide them under, and after its score products on the atomic
// path, so that they do not land while those read shared memory hardest;
// kStages = 1: they land while its dQ is computed, after every warp is done
// with dV and dK (a CTA barrier more). kStoreDs: the stored-dS path
// (p.ds_tiles set, no dQ accumulator), a kernel of its own so that the atomic
// one keeps its code.
template <class Elem, int kHeadDim, bool kMeanGrads, int kStages, bool kStoreDs>
__global__ void __launch_bounds__(kBwdThreads, 2) bwd_kernel(const __grid_constant__ BwdKernelParams p) {
  using Consumer = BwdConsumer<Elem, kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kTile = kTileRows * kHeadDim;
  Elem* const sk = reinterpret_cast<Elem*>(smem);
  Elem* const sv = sk + kTile;
  Elem* const sp = sv + kTile;
  Elem* const sds = sp + kTileRows * kTileRows;
  unsigned char* const stages = reinterpret_cast<unsigned char*>(sds + kTileRows * kTileRows);
  const auto stage = [&](int n) {  // the query tiles of the n-th pair
    unsigned char* const base = stages + (kStages == 2 ? n & 1 : 0) * pair_tiles_bytes<Elem, kHeadDim>();
    Elem* const q = reinterpret_cast<Elem*>(base);
    float* const lse = reinterpret_cast<float*>(q + 2 * kTile);
    return PairTiles<Elem>{q, q + kTile, lse, lse + kTileRows};
  };

  KeyScheduler sched(p);
  constexpr bool kAddDq = !kStoreDs;  // else the dQ pass computes dq
  const int first_entry = kStoreDs ? stored_ds_first_entry(p) : 0;
  const BwdKeyRows<Elem> keys = key_rows<Elem>(p, sched);
  const int valid = sched.valid_keys();
  Consumer consumer(static_cast<int>(threadIdx.x) / 32);

  PairRowsCache<Elem, kHeadDim> cache;
  BwdPair pair{};
  int entry = 0;  // pair's KV->Q entry (the stored-dS path's tile)
  bool have = valid > 0 && sched.next(pair, entry);  // a tile with no real keys has all-zero gradients
  if (have) {
    load_tile_async<Elem, kHeadDim, kBwdThreads>(sk, keys.k, p.k_stride.seq, valid);  // dQ += dS·K
    load_tile_async<Elem, kHeadDim, kBwdThreads>(sv, keys.v, p.v_stride.seq);
    load_pair<Elem, kHeadDim>(cache.rows(p, sched.batch(), pair), sched.real_rows(pair), p, stage(0));
  }
  ptx::cp_async_commit();
  int n = 0;  // pairs done
  while (have) {
    const PairTiles<Elem> cur = stage(n);
    ptx::cp_async_wait<0>();  // this pair's query tiles (and K, V) ...
    __syncthreads();          // ... for every thread; every warp is done with the last pair
    BwdPair next{};
    int next_entry = 0;
    const bool have_next = sched.next(next, next_entry);
    const int next_real_rows = have_next ? sched.real_rows(next) : 0;  // looked up under this pair's products
    const auto load_next = [&] {
      if (have_next) load_pair<Elem, kHeadDim>(cache.rows(p, sched.batch(), next), next_real_rows, p, stage(n + 1));
      ptx::cp_async_commit();
    };
    if constexpr (kStages == 2 && kStoreDs) load_next();

    typename Consumer::Scores s, dp;
    consumer.scores(sk, sv, cur.q, cur.dout, s, dp);
    if constexpr (kStages == 2 && !kStoreDs) load_next();
    const int real_rows = sched.real_rows(pair);  // of the query tile; the rest are padding
    consumer.gradients(s, dp, cur.lse, cur.delta, p.scale_log2, valid, real_rows);
    consumer.store(sp, sds, s, dp);
    if constexpr (kStoreDs)
      consumer.copy_ds_rows(sds, p.ds_tiles + sched.stored_tile(pair, entry, first_entry) * kStoredDsTileBytes);
    if constexpr (kStages == 2) {
      consumer.sync_key_rows();  // this warp's keys' rows of Pᵀ and dSᵀ are whole
      consumer.accumulate(sp, sds, cur.q, cur.dout);
    } else {
      consumer.sync_key_rows();  // this warp's keys' rows of Pᵀ and dSᵀ are whole
      consumer.accumulate(sp, sds, cur.q, cur.dout);
      __syncthreads();  // every warp is done with Q, dO, lse, delta; dSᵀ is whole
      load_next();
    }
    if constexpr (kAddDq) consumer.add_dq(sds, sk, cache.rows(p, sched.batch(), pair).dq_accum, real_rows);

    pair = next;
    entry = next_entry;
    have = have_next;
    ++n;
  }
  // No copy is in flight here. The last pair read stage n − 1; with two stages
  // every warp was done with the other one before that pair began. Each warp
  // stages only its own part of the Q and dO tiles.
  const PairTiles<Elem> spare = stage(n);
  write_key_grads(consumer, p.scale, spare.q, spare.dout, keys.dk, p.dk_stride.seq, keys.dv, p.dv_stride.seq,
                  key_mean_grad_rows<kMeanGrads>(p, p.dk_mean, sched, kHeadDim),
                  key_mean_grad_rows<kMeanGrads>(p, p.dv_mean, sched, kHeadDim));
}

// CTAs of the key pass per SM with kStages query stages, by shared memory (registers allow two).
template <class Elem, int kHeadDim, int kStages>
int bwd_ctas_per_sm(int sm_smem, int reserved_per_cta) {
  const int ctas = sm_smem / (bwd_smem_bytes<Elem, kHeadDim, kStages>() + reserved_per_cta);
  return ctas < 2 ? ctas : 2;
}

// Whether two query stages leave as many CTAs per SM as one (sm_90's 228 KB: two CTAs at
// D = 128; sm_80's 164 KB: at D = 64 only).
template <class Elem, int kHeadDim>
bool two_query_stages_fit() {
  int device = 0, sm_smem = 0, reserved = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sm_smem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device),
             "cudaDeviceGetAttribute(shared memory per SM)");
  check_cuda(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device),
             "cudaDeviceGetAttribute(reserved shared memory per block)");
  return bwd_ctas_per_sm<Elem, kHeadDim, 2>(sm_smem, reserved) >= bwd_ctas_per_sm<Elem, kHeadDim, 1>(sm_smem, reserved);
}

// The key pass's query stages, by what the H200 measured (docs/kernel-notes.md): two where they
// fit, for the stored-dS pass (2.7 % faster, 2026-12-02) and for the atomic one without query
// padding (its key pass 1.6 % faster under Nsight Compute, the backward 0.1-1.6 % in four rounds,
// 2026-12-04); one for the atomic pass of a call with q_variable_block_sizes, where two measured
// 0.5-1.4 % slower (Wan 480p's tiling: 1.5 % more instructions for the stages' addresses).
template <class Elem, int kHeadDim>
int query_stages(const BwdKernelParams& p) {
  const bool store_ds = p.ds_tiles != nullptr, query_padding = p.q_vbs != nullptr;
  return (store_ds || !query_padding) && two_query_stages_fit<Elem, kHeadDim>() ? 2 : 1;
}

template <class Elem, int kHeadDim>
void launch_bwd(const BwdKernelParams& p, int num_kv_tiles, int units, cudaStream_t stream) {
  with_mean_grads(p.dk_mean != nullptr || p.dv_mean != nullptr, [&](auto mean_grads) {
    constexpr bool kMeanGrads = decltype(mean_grads)::value;
    const auto launch = [&](auto stages, auto store_ds) {
      constexpr int kStages = decltype(stages)::value;
      launch_kernel<bwd_kernel<Elem, kHeadDim, kMeanGrads, kStages, decltype(store_ds)::value>,
                    bwd_smem_bytes<Elem, kHeadDim, kStages>()>(key_tile_grid(num_kv_tiles, units), kBwdThreads,
                                                               stream, p, "bwd_kernel (sm80)");
    };
    const auto with_stages = [&](auto store_ds) {
      if (query_stages<Elem, kHeadDim>(p) == 2)
        launch(std::integral_constant<int, 2>{}, store_ds);
      else
        launch(std::integral_constant<int, 1>{}, store_ds);
    };
    if (p.ds_tiles == nullptr)
      with_stages(std::false_type{});
    else
      with_stages(std::true_type{});
  });
}

}  // namespace vsa::cuda::sm80
