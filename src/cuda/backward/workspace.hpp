// The backward's device scratch, carved out of the caller's workspace (the
// library allocates nothing): delta, the fp32 dQ accumulator (atomic path
// only), the KV->Q lists with their scratch and the key pass's work order,
// and on the stored-dS path each listed q2k entry's place in the KV->Q lists
// and one group's dSᵀ tiles. Every region starts 256-byte aligned.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cuda/backward/kv_lists.hpp"
#include "cuda/kernel_choice.hpp"
#include "vsa/attention.hpp"

namespace vsa::cuda {

// The stored-dS path's dSᵀ tile: 64 keys × 64 query rows of 16-bit elements,
// stored as the key pass's shared tile (sm90/bwd_kernel.cuh).
constexpr std::size_t kDsTileBytes = 64 * 64 * 2;

// The stored-dS path runs its key pass and dQ pass over groups of `units_per_group` (batch, kv
// head) units (unit = batch · kv heads + kv head), so that a group's dSᵀ tiles fit in the cap.
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
  DsGroups ds;  // stored_ds only

  static BwdWorkspace layout(const ProblemShape& s, DqMethod method) {
    BwdWorkspace w{};
    std::size_t at = 0;
    auto take = [&at](std::int64_t count, std::size_t element) {
      const std::size_t start = at;
      at += (static_cast<std::size_t>(count) * element + 255) / 256 * 256;
      return start;
    };
    const bool stored_ds = method == DqMethod::stored_ds;
    const std::int64_t rows = s.batch * s.heads * s.seq_q;
    const std::int64_t lists = s.batch * s.heads * s.num_kv_blocks;
    const std::int64_t entries = s.batch * s.heads * s.num_q_blocks * s.max_kv;
    if (stored_ds) w.ds = DsGroups::plan(s, stored_ds_cap_bytes());
    w.delta = take(rows, sizeof(float));
    w.dq_accum = take(method == DqMethod::atomic ? rows * s.head_dim : 0, sizeof(float));
    w.cursors = take(lists * kListRanges, sizeof(int));
    w.offsets = take(lists + 1, sizeof(int));
    w.blocks = take(entries, sizeof(int));
    w.order = take(s.batch * s.kv_heads * s.num_kv_blocks, sizeof(int));
    w.ds_slots = take(stored_ds ? entries : 0, sizeof(int));
    w.ds_tiles = take(stored_ds ? w.ds.units_per_group * w.ds.tiles_per_unit : 0, kDsTileBytes);
    w.total = at;
    return w;
  }
};

}  // namespace vsa::cuda
