// The portable (sm_80+) block-sparse backward, key pass: a CTA of four warps
// owns one 64-key tile of one (batch, kv head), walks the query row tiles
// that attend to it (the inverted lists, KeyScheduler), keeps the tile's dK
// and dV in registers and writes them once. With a dQ accumulator, dS·K is
// added into it (a row pass turns it into dq afterwards, backward/row_passes.cu);
// without one, the dQ pass (bwd_dq_kernel.cuh) computes dq.
//
// Shared memory: K and V (resident), one Q and one dO tile with their lse and
// delta, and the Pᵀ and dSᵀ tiles: 81 KB at D = 128, so it launches on every
// GPU from sm_80 on (the 99 KB of sm_86/89/120 included; two CTAs per SM on
// sm_80 and sm_90). The next pair's Q/dO land while this pair's dQ = dS·K
// runs and its sums go out.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/key_scheduler.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/sm80/bwd_epilogue.cuh"

namespace vsa::cuda::sm80 {

template <class Elem, int kHeadDim>
constexpr int bwd_smem_bytes() {
  // K, V, Q, dO tiles; the Pᵀ and dSᵀ tiles; lse and delta of the query tile.
  return (4 * kTileRows * kHeadDim + 2 * kTileRows * kTileRows) * static_cast<int>(sizeof(Elem)) +
         2 * kTileRows * static_cast<int>(sizeof(float));
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
                                          Elem* sq, Elem* sdo, float* s_lse, float* s_delta) {
  load_tile_async<Elem, kHeadDim, kBwdThreads>(sq, rows.q, p.q_stride.seq, real_rows);
  load_tile_async<Elem, kHeadDim, kBwdThreads>(sdo, rows.dout, p.dout_stride.seq, real_rows);
  const int t = static_cast<int>(threadIdx.x);
  constexpr int kChunks = kTileRows / 4;
  if (t < kChunks)
    ptx::cp_async_16(ptx::smem_addr(s_lse + 4 * t), rows.lse + 4 * t);
  else if (t < 2 * kChunks)
    ptx::cp_async_16(ptx::smem_addr(s_delta + 4 * (t - kChunks)), rows.delta + 4 * (t - kChunks));
}

template <class Elem, int kHeadDim, bool kMeanGrads>
__global__ void __launch_bounds__(kBwdThreads, 2) bwd_kernel(const __grid_constant__ BwdKernelParams p) {
  using Consumer = BwdConsumer<Elem, kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kTile = kTileRows * kHeadDim;
  Elem* const sk = reinterpret_cast<Elem*>(smem);
  Elem* const sv = sk + kTile;
  Elem* const sq = sv + kTile;
  Elem* const sdo = sq + kTile;
  Elem* const sp = sdo + kTile;
  Elem* const sds = sp + kTileRows * kTileRows;
  float* const s_lse = reinterpret_cast<float*>(sds + kTileRows * kTileRows);
  float* const s_delta = s_lse + kTileRows;

  KeyScheduler sched(p);
  const bool add_dq = p.dq_accum != nullptr;  // else the dQ pass computes dq
  const BwdKeyRows<Elem> keys = key_rows<Elem>(p, sched);
  const int valid = sched.valid_keys();
  Consumer consumer(static_cast<int>(threadIdx.x) / 32);

  PairRowsCache<Elem, kHeadDim> cache;
  BwdPair pair{};
  bool have = valid > 0 && sched.next(pair);  // a tile with no real keys has all-zero gradients
  if (have) {
    load_tile_async<Elem, kHeadDim, kBwdThreads>(sk, keys.k, p.k_stride.seq, valid);  // dQ += dS·K
    load_tile_async<Elem, kHeadDim, kBwdThreads>(sv, keys.v, p.v_stride.seq);
    load_pair<Elem, kHeadDim>(cache.rows(p, sched.batch(), pair), sched.real_rows(pair), p, sq, sdo, s_lse, s_delta);
  }
  ptx::cp_async_commit();
  while (have) {
    ptx::cp_async_wait<0>();  // this pair's Q, dO, lse, delta (and K, V) ...
    __syncthreads();          // ... for every thread; every warp is done with the last Pᵀ and dSᵀ
    BwdPair next{};
    const bool have_next = sched.next(next);
    const int next_real_rows = have_next ? sched.real_rows(next) : 0;  // looked up under this pair's products

    typename Consumer::Scores s, dp;
    consumer.scores(sk, sv, sq, sdo, s, dp);
    const int real_rows = sched.real_rows(pair);  // of the query tile; the rest are padding
    consumer.gradients(s, dp, s_lse, s_delta, p.scale_log2, valid, real_rows);
    consumer.store(sp, sds, s, dp);
    __syncthreads();  // Pᵀ and dSᵀ are whole
    consumer.accumulate(sp, sds, sq, sdo);

    __syncthreads();  // every warp is done with Q, dO, lse, delta
    if (have_next)
      load_pair<Elem, kHeadDim>(cache.rows(p, sched.batch(), next), next_real_rows, p, sq, sdo, s_lse, s_delta);
    ptx::cp_async_commit();
    if (add_dq) consumer.add_dq(sds, sk, cache.rows(p, sched.batch(), pair).dq_accum, real_rows);

    pair = next;
    have = have_next;
  }
  // No copy is in flight here, and each warp stages only its own part of the
  // Q and dO tiles.
  write_key_grads(consumer, p.scale, sq, sdo, keys.dk, p.dk_stride.seq, keys.dv, p.dv_stride.seq,
                  key_mean_grad_rows<kMeanGrads>(p, p.dk_mean, sched, kHeadDim),
                  key_mean_grad_rows<kMeanGrads>(p, p.dv_mean, sched, kHeadDim));
}

template <class Elem, int kHeadDim>
void launch_bwd(const BwdKernelParams& p, int num_kv_tiles, int batch, cudaStream_t stream) {
  with_mean_grads(p.dk_mean != nullptr || p.dv_mean != nullptr, [&](auto mean_grads) {
    launch_kernel<bwd_kernel<Elem, kHeadDim, decltype(mean_grads)::value>, bwd_smem_bytes<Elem, kHeadDim>()>(
        key_tile_grid(p, num_kv_tiles, batch), kBwdThreads, stream, p, "bwd_kernel (sm80)");
  });
}

}  // namespace vsa::cuda::sm80
