// The backward's device scratch, carved out of the caller's workspace (the
// library allocates nothing): delta, the fp32 dQ accumulator (atomic path
// only), the KV->Q lists with their scratch and the key pass's work order. Every region starts 256-byte
// aligned.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/backward/kv_lists.hpp"
#include "vsa/attention.hpp"

namespace vsa::cuda {

struct BwdWorkspace {
  std::size_t delta, dq_accum, cursors, offsets, blocks, order;  // byte offsets
  std::size_t total;

  // with_dq_accum: the atomic dQ path (not the deterministic dQ pass).
  static BwdWorkspace layout(const ProblemShape& s, bool with_dq_accum) {
    BwdWorkspace w{};
    std::size_t at = 0;
    auto take = [&at](std::int64_t count, std::size_t element) {
      const std::size_t start = at;
      at += (static_cast<std::size_t>(count) * element + 255) / 256 * 256;
      return start;
    };
    const std::int64_t rows = s.batch * s.heads * s.seq_q;
    const std::int64_t lists = s.batch * s.heads * s.num_kv_blocks;
    const std::int64_t entries = s.batch * s.heads * s.num_q_blocks * s.max_kv;
    w.delta = take(rows, sizeof(float));
    w.dq_accum = take(with_dq_accum ? rows * s.head_dim : 0, sizeof(float));
    w.cursors = take(lists * kListRanges, sizeof(int));
    w.offsets = take(lists + 1, sizeof(int));
    w.blocks = take(entries, sizeof(int));
    w.order = take(s.batch * s.kv_heads * s.num_kv_blocks, sizeof(int));
    w.total = at;
    return w;
  }
};

}  // namespace vsa::cuda
