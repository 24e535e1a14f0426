// The backward's device scratch, carved out of the caller's workspace (the
// library allocates nothing): delta, the fp32 dQ accumulator (atomic path
// only), the KV->Q lists with their scratch and the key pass's work order,
// and on the stored-dS path each listed q2k entry's place in the KV->Q lists
// and one group's dSᵀ tiles. Every region starts 256-byte aligned.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/backward/kv_lists.hpp"
#include "cuda/kernel_choice.hpp"
#include "vsa/attention.hpp"
#include "vsa/error.hpp"

namespace vsa::cuda {

// The stored-dS path's dSᵀ tile: 64 keys × 64 query rows of 16-bit elements,
// stored as the key pass's shared tile (sm90/bwd_kernel.cuh).
constexpr std::size_t kDsTileBytes = 64 * 64 * 2;

// The KV->Q lists count their entries and lists in int32 (kv_lists.cu, the key pass's
// KeyScheduler and the stored-dS tiles' places), so the lists are built, and the key and dQ
// passes run, over chunks of (batch, kv head) units whose q2k capacity (query rows · max_kv: at
// least the entries they list) stays below 2^31 and whose lists (query heads · NK) stay at most
// 2^30 (the single-CTA scan rounds the list count up to its threads' runs in int32). A
// chunk is whole batches (all kv heads), or, where one batch is too large, kv heads of one
// batch: either way its query heads, rows of lse and q2k lists are consecutive, so the kernels
// run it as a problem of its own from shifted pointers (backward.cu). Nearly every call is one
// chunk, the whole problem, as before chunks existed; a single unit too large is unsupported.
struct ListChunks {
  static constexpr std::int64_t kMaxLists = std::int64_t{1} << 30;
  std::int64_t batches_per_chunk = 0, kv_heads_per_chunk = 0;

  // max_entries: at most kMaxListEntries (list_entries_cap()).
  static ListChunks plan(const ProblemShape& s, std::int64_t max_entries) {
    const std::int64_t group = s.heads / s.kv_heads;
    const std::int64_t unit_entries = group * s.num_q_blocks * s.max_kv, unit_lists = group * s.num_kv_blocks;
    const std::int64_t fit = std::min(max_entries / unit_entries, kMaxLists / unit_lists);
    if (fit < 1)
      throw Error(ErrorKind::unsupported, "q2k_idx.shape",
                  "at most " + std::to_string(max_entries) +
                      " list entries (query heads per kv head · NQ · max_kv) and 2^30 KV->Q lists (query heads "
                      "per kv head · NK) per (batch, kv head) in the CUDA backward",
                  std::to_string(group) + " · " + std::to_string(s.num_q_blocks) + " · " + std::to_string(s.max_kv) +
                      " entries, " + std::to_string(unit_lists) + " lists");
    ListChunks c;
    c.kv_heads_per_chunk = std::min(fit, s.kv_heads);
    c.batches_per_chunk = fit >= s.kv_heads ? std::min(fit / s.kv_heads, s.batch) : 1;
    return c;
  }
  std::int64_t units_per_chunk() const { return batches_per_chunk * kv_heads_per_chunk; }
};

// The stored-dS path runs its key pass and dQ pass over groups of `units_per_group` (batch, kv
// head) units (unit = batch · kv heads + kv head), so that a group's dSᵀ tiles fit in the cap
// (a group lies in one list chunk: backward.cu takes at most a chunk's units).
struct DsGroups {
  std::int64_t units = 0, units_per_group = 0;
  std::int64_t tiles_per_unit = 0;  // the most tiles one unit can store: kv_group · NQ · max_kv · (blk/64)²

  static DsGroups plan(const ProblemShape& s, std::size_t cap_bytes) {
    DsGroups g;
    const std::int64_t tiles_per_block = s.block / 64;
    g.units = s.batch * s.kv_heads;
    g.tiles_per_unit = s.heads / s.kv_heads * s.num_q_blocks * s.max_kv * tiles_per_block * tiles_per_block;
    const auto fit = static_cast<std::int64_t>(cap_bytes / kDsTileBytes) / std::max<std::int64_t>(g.tiles_per_unit, 1);
    g.units_per_group = std::clamp<std::int64_t>(fit, 1, std::max<std::int64_t>(g.units, 1));
    return g;
  }
  std::int64_t groups() const { return (units + units_per_group - 1) / units_per_group; }
};

struct BwdWorkspace {
  std::size_t delta, dq_accum, cursors, offsets, blocks, order, ds_slots, ds_tiles;  // byte offsets
  std::size_t total;
  ListChunks chunks;  // the lists' regions hold one chunk's
  DsGroups ds;        // stored_ds only

  static BwdWorkspace layout(const ProblemShape& s, DqMethod method) {
    BwdWorkspace w{};
    std::size_t at = 0;
    auto take = [&at](std::int64_t count, std::size_t element) {
      const std::size_t start = at;
      at += (static_cast<std::size_t>(count) * element + 255) / 256 * 256;
      return start;
    };
    const bool stored_ds = method == DqMethod::stored_ds;
    w.chunks = ListChunks::plan(s, list_entries_cap());
    const std::int64_t rows = s.batch * s.heads * s.seq_q;
    const std::int64_t chunk_heads = w.chunks.units_per_chunk() * (s.heads / s.kv_heads);  // query heads
    const std::int64_t lists = chunk_heads * s.num_kv_blocks;
    const std::int64_t entries = chunk_heads * s.num_q_blocks * s.max_kv;
    if (stored_ds) {
      w.ds = DsGroups::plan(s, stored_ds_cap_bytes());
      w.ds.units_per_group = std::min(w.ds.units_per_group, w.chunks.units_per_chunk());
    }
    w.delta = take(rows, sizeof(float));
    w.dq_accum = take(method == DqMethod::atomic ? rows * s.head_dim : 0, sizeof(float));
    w.cursors = take(lists * kListRanges, sizeof(int));
    w.offsets = take(lists + 1, sizeof(int));
    w.blocks = take(entries, sizeof(int));
    w.order = take(w.chunks.units_per_chunk() * s.num_kv_blocks, sizeof(int));
    w.ds_slots = take(stored_ds ? entries : 0, sizeof(int));
    w.ds_tiles = take(stored_ds ? w.ds.units_per_group * w.ds.tiles_per_unit : 0, kDsTileBytes);
    w.total = at;
    return w;
  }
};

}  // namespace vsa::cuda
