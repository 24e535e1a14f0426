// Tile scheduler of the backward's key pass (sm80 and sm90): which 64-key tile
// a CTA owns, and the sequence of 64-row query tiles it visits — for each
// query head of its kv head's group, the query blocks whose lists name its
// KV block (the inverted lists, ascending), each split into blk/64 row tiles.
// A block listed twice by one query block appears twice and is visited twice.
// CTAs take the (batch, kv head, kv block) items in p.kv_order's order: heads
// in turn, within a head most listed first, blk/64 consecutive CTAs per item.
// CTAs start roughly in launch order, and a long list started last would run
// alone at the end.
#pragma once

#include <cstdint>

#include "cuda/common/block_lists.cuh"
#include "cuda/common/kernel_params.hpp"
#include "cuda/common/mean_grad_rows.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/common/stored_ds.cuh"

namespace vsa::cuda {

// One unit of work: a query head and the first row of its 64-row tile.
struct BwdPair {
  int head;
  std::int64_t row0;
};

class KeyScheduler {
 public:
  // ahead_slots: 8 bytes of shared memory for the Hopper key pass's next<true> (read_ahead),
  // whose copies thread ahead_thread issues.
  __device__ explicit KeyScheduler(const BwdKernelParams& p, std::uint32_t ahead_slots = 0, int ahead_thread = 0)
      : p_(p),
        tile_shift_(p.block == 2 * kTileRows ? 1 : 0),
        entry_(0),
        entry_end_(0),
        q_block_(0),
        q_count_(0),
        ahead_slots_(ahead_slots),
        ahead_thread_(ahead_thread),
        row_tile_(0) {
    const int cta = static_cast<int>((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x);
    const int item = __ldg(p.kv_order + (cta >> tile_shift_));
    const int kv_heads = p.heads / p.kv_group;
    kv_block_ = item % p.num_kv_blocks;
    kv_head_ = item / p.num_kv_blocks % kv_heads;
    batch_ = item / p.num_kv_blocks / kv_heads;
    key_tile_ = cta & ((1 << tile_shift_) - 1);
    head_ = kv_head_ * p.kv_group - 1;
  }

  __device__ int batch() const { return batch_; }
  __device__ int kv_head() const { return kv_head_; }
  __device__ int kv_block() const { return kv_block_; }
  __device__ std::int64_t first_key() const {
    return static_cast<std::int64_t>(kv_block_) * p_.block + key_tile_ * kTileRows;
  }
  // Keys [0, result) of the tile are real; <= 0 means none (nothing to do).
  __device__ int valid_keys() const {
    const int valid = static_cast<int>(load_meta(p_.vbs, p_.vbs_is_64, kv_block_)) - key_tile_ * kTileRows;
    return valid < kTileRows ? valid : kTileRows;
  }

  // Rows [0, result) of the pair's tile are real queries (q_variable_block_sizes). The
  // portable key pass looks them up for its copies and again for its mask (a register less
  // across its loop, where it has none to spare); the Hopper one carries them from next().
  __device__ int real_rows(const BwdPair& pair) const {
    constexpr int kLog2TileRows = 6;
    static_assert(1 << kLog2TileRows == kTileRows);
    const int offset = static_cast<int>(pair.row0 & (p_.block - 1));  // blk is a power of 2
    return real_query_rows(p_.q_vbs, p_.q_vbs_is_64, pair.row0 >> (kLog2TileRows + tile_shift_), offset, kTileRows);
  }

  // The stored-dS path: the place of the pair's dSᵀ tile among its group's (stored_ds.cuh),
  // given the KV->Q entry next() named with it and the group's first.
  __device__ std::int64_t stored_tile(const BwdPair& pair, int entry, int first_entry) const {
    const int row_tile = static_cast<int>(pair.row0 & (p_.block - 1)) / kTileRows;
    return stored_ds_tile(entry - first_entry, row_tile, key_tile_, tile_shift_);
  }

  // The next pair, false once every listed query tile has been handed out; `entry`: the KV->Q
  // list entry it came from; `real_rows`: its tile's real query rows (as real_rows(pair)).
  // The lookups run ahead of the walk: each entry's query block is read as the entry before
  // it is handed out. kCountAhead: the Hopper key pass (it hands out a pair under the last
  // one's products) also has the entry after next's block copied then (read_ahead), and reads
  // the next entry's real-query count, so nothing a pair's copies depend on is read in the same
  // step; the portable one (255 registers, no room for two more: it spilled) reads the count in
  // the step. At a list's start the first entry's lookups are waited for.
  template <bool kCountAhead>
  __device__ bool next(BwdPair& pair, int& entry, int& real_rows) {
    bool list_started = false;   // in this call: the second entry's copy has not landed
    if (entry_ == entry_end_) {  // the next query head's list that names the block (rare: GQA)
      do {
        if (++head_ == (kv_head_ + 1) * p_.kv_group) return false;
        const std::int64_t list =
            (static_cast<std::int64_t>(batch_) * p_.heads + head_) * p_.num_kv_blocks + kv_block_;
        entry_ = __ldg(p_.k2q_offsets + list);
        entry_end_ = __ldg(p_.k2q_offsets + list + 1);
      } while (entry_ == entry_end_);
      q_block_ = __ldg(p_.k2q_blocks + entry_);
      list_started = true;
      if constexpr (kCountAhead) read_ahead();
    }
    pair = {head_, static_cast<std::int64_t>(q_block_) * p_.block + row_tile_ * kTileRows};
    entry = entry_;
    const int rows =
        (kCountAhead ? q_count_ : query_block_count(p_.q_vbs, p_.q_vbs_is_64, q_block_, p_.block)) -
        row_tile_ * kTileRows;
    real_rows = rows < kTileRows ? rows : kTileRows;
    if (++row_tile_ == (1 << tile_shift_)) {
      row_tile_ = 0;
      if (++entry_ < entry_end_) {
        if constexpr (kCountAhead) {
          q_block_ = list_started ? __ldg(p_.k2q_blocks + entry_)
                                  : static_cast<int>(ptx::ld_shared_b32(slot(entry_)));
          read_ahead();
        } else {
          q_block_ = __ldg(p_.k2q_blocks + entry_);
        }
      }
    }
    return true;
  }

  // The portable key pass's: real_rows(pair) gives the rows, where its copies are issued.
  __device__ bool next(BwdPair& pair, int& entry) {
    int unused_rows = 0;  // the count's load is dead code here, left out by the compiler
    return next<false>(pair, entry, unused_rows);
  }

 private:
  // entry_'s real-query count (its block q_block_ read), and entry_ + 1's block copied into its
  // slot by thread ahead_thread_. The copy joins the caller's next commit group, which every
  // thread has waited for (cp.async wait by that thread, then a CTA barrier) by the call that
  // reads the slot.
  // A load into a register (session 25's profile) kept the old value's register busy, and ptxas
  // moved the loaded value into it at once: one move that waited the load's whole latency, 5 %
  // of the key pass's stall samples.
  __device__ void read_ahead() {
    q_count_ = query_block_count(p_.q_vbs, p_.q_vbs_is_64, q_block_, p_.block);
    if (static_cast<int>(threadIdx.x) == ahead_thread_ && entry_ + 1 < entry_end_)
      ptx::cp_async_4(slot(entry_ + 1), p_.k2q_blocks + entry_ + 1);
  }
  // Entries alternate between two slots: entry e + 2's copy (issued when e + 1 is reached)
  // comes a CTA barrier after every thread has read e's.
  __device__ std::uint32_t slot(int entry) const {
    return ahead_slots_ + 4u * static_cast<std::uint32_t>(entry & 1);
  }

  const BwdKernelParams& p_;
  int batch_, kv_head_;
  int tile_shift_;           // log2(blk / 64)
  int kv_block_, key_tile_;  // the CTA's block and which 64 keys of it
  int head_;                 // query head of the list being walked
  int entry_, entry_end_;    // position in that list
  int q_block_, q_count_;    // the query block of entry_ and its real queries (kCountAhead)
  std::uint32_t ahead_slots_;  // entry_ + 1's query block, by its parity (kCountAhead)
  int ahead_thread_;           // the thread that copies it
  int row_tile_;             // which 64 rows of the current query block
};

// Where a pair's rows are: its q and dout rows, its lse/delta entries and its
// dQ accumulator tile.
template <class Elem>
struct BwdPairRows {
  const Elem* q;
  const Elem* dout;
  const float* lse;
  const float* delta;
  float* dq_accum;
};

// The pair's first row among lse's and delta's [B·H·Sq] rows. B·H fits 32 bits (lse holds
// B·H·Sq floats), so (b, h)'s index is formed in 32 bits, unsigned: one wide multiply by Sq and
// no sign extension, on the path where the stored key pass's slowest warp copies the stats.
__device__ __forceinline__ std::int64_t pair_stat_row(const BwdKernelParams& p, int batch, const BwdPair& pair) {
  const std::uint32_t batch_head = static_cast<std::uint32_t>(batch * p.heads + pair.head);
  return static_cast<std::int64_t>(batch_head) * p.seq_q + pair.row0;
}

template <class Elem, int kHeadDim>
__device__ __forceinline__ BwdPairRows<Elem> pair_rows(const BwdKernelParams& p, int batch, const BwdPair& pair) {
  const std::int64_t stat = pair_stat_row(p, batch, pair);
  return {static_cast<const Elem*>(p.q) + batch * p.q_stride.batch + pair.head * p.q_stride.head +
              pair.row0 * p.q_stride.seq,
          static_cast<const Elem*>(p.dout) + batch * p.dout_stride.batch + pair.head * p.dout_stride.head +
              pair.row0 * p.dout_stride.seq,
          p.lse + stat, p.delta + stat, p.dq_accum + stat * kHeadDim};
}

// The CTA's K and V rows (read) and dK and dV rows (written once, at the end).
template <class Elem>
struct BwdKeyRows {
  const Elem* k;
  const Elem* v;
  Elem* dk;
  Elem* dv;
};

template <class Elem>
__device__ __forceinline__ BwdKeyRows<Elem> key_rows(const BwdKernelParams& p, const KeyScheduler& sched) {
  const int b = sched.batch(), h = sched.kv_head();
  const std::int64_t key = sched.first_key();
  return {static_cast<const Elem*>(p.k) + b * p.k_stride.batch + h * p.k_stride.head + key * p.k_stride.seq,
          static_cast<const Elem*>(p.v) + b * p.v_stride.batch + h * p.v_stride.head + key * p.v_stride.seq,
          static_cast<Elem*>(p.dk) + b * p.dk_stride.batch + h * p.dk_stride.head + key * p.dk_stride.seq,
          static_cast<Elem*>(p.dv) + b * p.dv_stride.batch + h * p.dv_stride.head + key * p.dv_stride.seq};
}

// The addend of dk_mean or dv_mean (one of p's) for the CTA's key tile; none in the kernels
// built without addends.
template <bool kEnabled>
__device__ __forceinline__ MeanGradRows key_mean_grad_rows(const BwdKernelParams& p, const float* means,
                                                           const KeyScheduler& sched, int head_dim) {
  if constexpr (!kEnabled) return {};
  return mean_grad_rows(means, sched.batch(), p.heads / p.kv_group, sched.kv_head(), p.num_kv_blocks,
                        sched.kv_block(), static_cast<int>(load_meta(p.vbs, p.vbs_is_64, sched.kv_block())),
                        sched.valid_keys(), head_dim);
}

// The grid of the key pass: a CTA per 64-key tile × `units` (batch, kv head) units, the
// first p.kv_order's (the stored-dS path runs a group of units at a time).
inline dim3 key_tile_grid(int num_kv_tiles, int units) {
  return dim3(static_cast<unsigned>(num_kv_tiles), static_cast<unsigned>(units));
}

}  // namespace vsa::cuda
