#include "cpu/inverted_lists.hpp"

#include <algorithm>

#include "core/layout.hpp"

namespace vsa::cpu {

InvertedLists::InvertedLists(const TensorRef& q2k_idx, const TensorRef& q2k_num, std::int64_t num_kv_blocks)
    : num_kv_blocks_(num_kv_blocks) {
  const std::int64_t batch_heads = q2k_num.shape[0] * q2k_num.shape[1];
  const std::int64_t num_q_blocks = q2k_num.shape[2];
  const std::int64_t max_kv = q2k_idx.shape[3];
  auto listed = [&](std::int64_t bh, std::int64_t i, std::int64_t e) {
    return detail::load_int(q2k_idx, (bh * num_q_blocks + i) * max_kv + e);
  };
  auto count = [&](std::int64_t bh, std::int64_t i) {
    return detail::load_int(q2k_num, bh * num_q_blocks + i);
  };

  // Counting sort: list lengths, their prefix sums, then a fill in query
  // block order, which leaves every list ascending.
  offsets_.assign(static_cast<std::size_t>(batch_heads * num_kv_blocks + 1), 0);
  for (std::int64_t bh = 0; bh < batch_heads; ++bh)
    for (std::int64_t i = 0; i < num_q_blocks; ++i)
      for (std::int64_t e = 0; e < count(bh, i); ++e) ++offsets_[bh * num_kv_blocks + listed(bh, i, e) + 1];
  for (std::size_t n = 1; n < offsets_.size(); ++n) offsets_[n] += offsets_[n - 1];

  entries_.resize(static_cast<std::size_t>(offsets_.back()));
  std::vector<std::int64_t> cursor(offsets_.begin(), offsets_.end() - 1);
  for (std::int64_t bh = 0; bh < batch_heads; ++bh)
    for (std::int64_t i = 0; i < num_q_blocks; ++i)
      for (std::int64_t e = 0; e < count(bh, i); ++e)
        entries_[cursor[bh * num_kv_blocks + listed(bh, i, e)]++] = i;
}

std::span<const std::int64_t> InvertedLists::query_blocks(std::int64_t batch_head,
                                                          std::int64_t kv_block) const {
  const std::int64_t list = batch_head * num_kv_blocks_ + kv_block;
  return {entries_.data() + offsets_[list], static_cast<std::size_t>(offsets_[list + 1] - offsets_[list])};
}

std::int64_t InvertedLists::longest() const {
  std::int64_t length = 0;
  for (std::size_t n = 1; n < offsets_.size(); ++n) length = std::max(length, offsets_[n] - offsets_[n - 1]);
  return length;
}

}  // namespace vsa::cpu
