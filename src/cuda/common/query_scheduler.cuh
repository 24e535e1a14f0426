// Tile scheduler of the kernels that walk a query block's list (the forward,
// and the backward's dQ pass): which kCtaRows query rows a CTA owns (a whole
// query block, or part of a 128-row one), and the sequence of 64-key tiles it
// visits — the listed KV blocks in list order, each split into blk/64 tiles.
//
// Lookups are split so the kernel can issue them a tile ahead with no branch
// on their result: block_of() is one load of the list, valid_keys() one load
// of vbs. Only the first num_tiles() tiles are ever looked up, so list
// padding past the count is never read.
#pragma once

#include <cstdint>

#include "cuda/common/block_lists.cuh"
#include "cuda/common/kernel_params.hpp"
#include "cuda/common/mean_grad_rows.cuh"

namespace vsa::cuda {

// Params: FwdKernelParams or BwdKernelParams (the same list fields).
template <int kCtaRows, class Params = FwdKernelParams>
class QueryScheduler {
 public:
  // The CTA's tile in a grid of query tiles × heads × batch (query_tile_grid).
  __device__ explicit QueryScheduler(const Params& p)
      : QueryScheduler(p, static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x)) {}
  // Query tile `q_tile` of (batch, head): a persistent kernel's work item.
  __device__ QueryScheduler(const Params& p, int batch, int head, int q_tile)
      : p_(p), batch_(batch), head_(head), q_tile_(q_tile), tile_shift_(p.block == 2 * kTileRows ? 1 : 0) {
    const int q_block = q_tile_ * kCtaRows / p.block;
    const std::int64_t row =
        (static_cast<std::int64_t>(batch_) * p.heads + head_) * p.num_q_blocks + q_block;
    list_ = row * p.max_kv;
    num_tiles_ = static_cast<int>(load_meta(p.q2k_num, p.num_is_64, row)) << tile_shift_;
  }

  __device__ int batch() const { return batch_; }
  __device__ int head() const { return head_; }
  __device__ int kv_head() const { return head_ / p_.kv_group; }
  __device__ std::int64_t first_query_row() const {
    return static_cast<std::int64_t>(q_tile_) * kCtaRows;
  }
  __device__ int num_tiles() const { return num_tiles_; }
  // The CTA's rows [0, result) are real queries (q_variable_block_sizes), for
  // the epilogues (one load per CTA, after the main loop).
  __device__ int real_rows() const {
    const std::int64_t row0 = first_query_row();
    return real_query_rows(p_.q_vbs, p_.q_vbs_is_64, row0 / p_.block, static_cast<int>(row0 % p_.block), kCtaRows);
  }

  // KV block id of tile `index`; 0 (never used) past the end of the list.
  __device__ std::int64_t block_of(int index) const {
    return index < num_tiles_ ? load_meta(p_.q2k_idx, p_.idx_is_64, list_ + (index >> tile_shift_)) : 0;
  }
  // The q2k entry of tile `index`: its flat index in [B, H, NQ, max_kv].
  __device__ std::int64_t list_entry(int index) const { return list_ + (index >> tile_shift_); }
  // First key token of tile `index` of block `block`.
  __device__ std::int64_t first_key(int index, std::int64_t block) const {
    return block * p_.block + (index & ((1 << tile_shift_) - 1)) * kTileRows;
  }
  // Keys [0, result) of the tile are real, result in [0, 64]; 0 means none
  // (the second tile of a 128-token block holding fewer than 64 tokens). Never
  // negative: the kernels zero the tile's rows from `result` on.
  __device__ int valid_keys(int index, std::int64_t block) const {
    const int valid = static_cast<int>(load_meta(p_.vbs, p_.vbs_is_64, block)) -
                      (index & ((1 << tile_shift_) - 1)) * kTileRows;
    return valid < 0 ? 0 : valid < kTileRows ? valid : kTileRows;
  }

 private:
  const Params& p_;
  int batch_, head_, q_tile_;  // q_tile_: index of the CTA's kCtaRows-row query tile
  int tile_shift_;  // log2(blk / 64): blocks of 64 or 128 keys
  std::int64_t list_;
  int num_tiles_;
};

// Where a CTA's rows are: its first q row and the K and V rows of its
// (batch, kv head), read from the start; its first out row and lse entry
// (null when lse is not wanted), written at the end, with what the fused gate
// combine adds to them (coarse null: nothing) and where the attention alone
// goes beside the combined rows (fine, or null).
template <class Elem>
struct CtaInputs {
  const Elem* q;
  const Elem* k;
  const Elem* v;
};
template <class Elem>
struct CtaOutputs {
  Elem* out;
  std::int64_t out_row_stride;
  float* lse;
  // A CTA's rows lie in one query block (kCtaRows <= block), so they share
  // one coarse row; gate is the CTA's first gate row, or null.
  const float* coarse;
  const Elem* gate;
  std::int64_t gate_row_stride;
  Elem* fine;
  std::int64_t fine_row_stride;
};

template <class Elem, int kCtaRows>
__device__ __forceinline__ CtaInputs<Elem> cta_inputs(const FwdKernelParams& p, const QueryScheduler<kCtaRows>& sched) {
  return {static_cast<const Elem*>(p.q) + sched.batch() * p.q_stride.batch + sched.head() * p.q_stride.head +
              sched.first_query_row() * p.q_stride.seq,
          static_cast<const Elem*>(p.k) + sched.batch() * p.k_stride.batch + sched.kv_head() * p.k_stride.head,
          static_cast<const Elem*>(p.v) + sched.batch() * p.v_stride.batch + sched.kv_head() * p.v_stride.head};
}

template <class Elem, int kHeadDim, int kCtaRows>
__device__ __forceinline__ CtaOutputs<Elem> cta_outputs(const FwdKernelParams& p,
                                                        const QueryScheduler<kCtaRows>& sched) {
  const std::int64_t q_row0 = sched.first_query_row();
  const std::int64_t bh = static_cast<std::int64_t>(sched.batch()) * p.heads + sched.head();
  return {static_cast<Elem*>(p.out) + sched.batch() * p.out_stride.batch + sched.head() * p.out_stride.head +
              q_row0 * p.out_stride.seq,
          p.out_stride.seq,
          p.lse == nullptr ? nullptr : p.lse + bh * (static_cast<std::int64_t>(p.num_q_blocks) * p.block) + q_row0,
          p.coarse == nullptr ? nullptr : p.coarse + (bh * p.num_q_blocks + q_row0 / p.block) * kHeadDim,
          p.gate == nullptr ? nullptr
                            : static_cast<const Elem*>(p.gate) + sched.batch() * p.gate_stride.batch +
                                  sched.head() * p.gate_stride.head + q_row0 * p.gate_stride.seq,
          p.gate_stride.seq,
          p.fine == nullptr ? nullptr
                            : static_cast<Elem*>(p.fine) + sched.batch() * p.fine_stride.batch +
                                  sched.head() * p.fine_stride.head + q_row0 * p.fine_stride.seq,
          p.fine_stride.seq};
}

// Where a dQ-pass CTA's rows are: its q and dout rows (read) and dq rows
// (written once, at the end), the K and V rows of its kv head, and the index
// of its first row in the [B, H, Sq] lse and delta.
template <class Elem>
struct DqTileRows {
  const Elem* q;
  const Elem* dout;
  const Elem* k;
  const Elem* v;
  Elem* dq;
  std::int64_t stat;
};

template <class Elem>
__device__ __forceinline__ DqTileRows<Elem> dq_tile_rows(const BwdKernelParams& p,
                                                         const QueryScheduler<kTileRows, BwdKernelParams>& sched) {
  const int b = sched.batch(), h = sched.head(), kvh = sched.kv_head();
  const std::int64_t row0 = sched.first_query_row();
  return {static_cast<const Elem*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head + row0 * p.q_stride.seq,
          static_cast<const Elem*>(p.dout) + b * p.dout_stride.batch + h * p.dout_stride.head + row0 * p.dout_stride.seq,
          static_cast<const Elem*>(p.k) + b * p.k_stride.batch + kvh * p.k_stride.head,
          static_cast<const Elem*>(p.v) + b * p.v_stride.batch + kvh * p.v_stride.head,
          static_cast<Elem*>(p.dq) + b * p.dq_stride.batch + h * p.dq_stride.head + row0 * p.dq_stride.seq,
          (static_cast<std::int64_t>(b) * p.heads + h) * p.seq_q + row0};
}

// The dq_mean addend of the dQ pass's tile (its rows lie in one query block, whose divisor is
// its q_variable_block_sizes count, or blk without them); none in the kernels built without
// addends.
template <bool kEnabled>
__device__ __forceinline__ MeanGradRows query_mean_grad_rows(
    const BwdKernelParams& p, const QueryScheduler<kTileRows, BwdKernelParams>& sched, int head_dim) {
  if constexpr (!kEnabled) return {};
  const std::int64_t q_block = sched.first_query_row() / p.block;
  return mean_grad_rows(p.dq_mean, sched.batch(), p.heads, sched.head(), p.num_q_blocks, q_block,
                        query_block_count(p.q_vbs, p.q_vbs_is_64, q_block, p.block), sched.real_rows(), head_dim);
}

// The grid of a kernel with a CTA per kCtaRows-row query tile: tiles × heads × batch.
template <int kCtaRows, class Params>
inline dim3 query_tile_grid(const Params& p, int batch) {
  return dim3(static_cast<unsigned>(p.num_q_blocks * (p.block / kCtaRows)), static_cast<unsigned>(p.heads),
              static_cast<unsigned>(batch));
}

}  // namespace vsa::cuda
