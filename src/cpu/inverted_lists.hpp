// KV block -> query blocks lists, built on the host from q2k lists, for
// invert_indices. (The backward builds its own per chunk, with the columns of
// each listed block: backward.cpp's TileLists.)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vsa/tensor.hpp"

namespace vsa::cpu {

// For each (batch*head, kv block) pair, the query blocks whose first q2k_num
// entries name that kv block: ascending, once per occurrence.
class InvertedLists {
 public:
  // q2k_idx [BH.., NQ, max_kv] and q2k_num [BH.., NQ] contiguous, values
  // validated (counts in [0, max_kv], listed ids in [0, num_kv_blocks)).
  InvertedLists(const TensorRef& q2k_idx, const TensorRef& q2k_num, std::int64_t num_kv_blocks);

  std::span<const std::int64_t> query_blocks(std::int64_t batch_head, std::int64_t kv_block) const;
  std::int64_t longest() const;

 private:
  std::int64_t num_kv_blocks_;
  std::vector<std::int64_t> offsets_;  // [BH * NK + 1], start of each list in entries_
  std::vector<std::int64_t> entries_;  // every list, back to back
};

}  // namespace vsa::cpu
