// CPU implementations of the list metadata: inputs arrive validated (shapes,
// dtypes, and for lists their values); these only compute.
#include <algorithm>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "core/layout.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/inverted_lists.hpp"

namespace vsa::cpu {

using detail::store_int;

void map_to_index(const TensorRef& block_map, const TensorRef& q2k_idx, const TensorRef& q2k_num) {
  const std::int64_t num_kv_blocks = block_map.shape[3];
  const std::int64_t rows = block_map.numel() / num_kv_blocks;
  // Read as bytes: any nonzero byte counts as true, without relying on the
  // caller's bools holding exactly 0 or 1.
  const auto* map = static_cast<const std::uint8_t*>(block_map.data);
  for (std::int64_t row = 0; row < rows; ++row) {
    std::int64_t count = 0;
    for (std::int64_t j = 0; j < num_kv_blocks; ++j)
      if (map[row * num_kv_blocks + j] != 0) store_int(q2k_idx, row * num_kv_blocks + count++, j);
    for (std::int64_t e = count; e < num_kv_blocks; ++e) store_int(q2k_idx, row * num_kv_blocks + e, -1);
    store_int(q2k_num, row, count);
  }
}

void invert_indices(const TensorRef& q2k_idx, const TensorRef& q2k_num, std::int64_t num_kv_blocks,
                    const TensorRef& k2q_idx, const TensorRef& k2q_num) {
  const InvertedLists lists(q2k_idx, q2k_num, num_kv_blocks);
  const std::int64_t capacity = k2q_idx.shape[3];
  // Checked before anything is written, so a failed call leaves the outputs alone.
  if (lists.longest() > capacity)
    detail::fail(
        "k2q_idx.shape",
        "a last axis (max_q) of at least " + std::to_string(lists.longest()) + ", the longest inverted list",
        "max_q = " + std::to_string(capacity));
  const std::int64_t batch_heads = q2k_num.shape[0] * q2k_num.shape[1];
  for (std::int64_t bh = 0; bh < batch_heads; ++bh) {
    for (std::int64_t j = 0; j < num_kv_blocks; ++j) {
      const std::int64_t list = bh * num_kv_blocks + j;
      const auto query_blocks = lists.query_blocks(bh, j);
      const auto length = static_cast<std::int64_t>(query_blocks.size());
      for (std::int64_t e = 0; e < capacity; ++e)
        store_int(k2q_idx, list * capacity + e, e < length ? query_blocks[e] : -1);
      store_int(k2q_num, list, length);
    }
  }
}

void topk_to_index(const TensorRef& topk, const TensorRef& q2k_idx, const TensorRef& q2k_num) {
  const std::int64_t k = topk.shape[3];
  const std::int64_t rows = topk.numel() / k;
  std::vector<std::int64_t> row_ids(static_cast<std::size_t>(k));
  for (std::int64_t row = 0; row < rows; ++row) {
    // Read the whole row first: topk and q2k_idx may be the same memory.
    for (std::int64_t e = 0; e < k; ++e) row_ids[e] = detail::load_int(topk, row * k + e);
    std::sort(row_ids.begin(), row_ids.end());
    for (std::int64_t e = 0; e < k; ++e) store_int(q2k_idx, row * k + e, row_ids[e]);
    store_int(q2k_num, row, k);
  }
}

void pack_varlen_index(const TensorRef& local_idx, const TensorRef& q2k_num, const TensorRef& cu_q_blocks,
                       const TensorRef& cu_kv_blocks, const TensorRef& packed_idx) {
  const std::int64_t batch_heads = q2k_num.shape[0] * q2k_num.shape[1];
  const std::int64_t nq = local_idx.shape[2], max_kv = local_idx.shape[3];
  for (std::int64_t s = 0; s + 1 < cu_q_blocks.numel(); ++s) {
    const std::int64_t kv_offset = detail::load_int(cu_kv_blocks, s);
    for (std::int64_t i = detail::load_int(cu_q_blocks, s); i < detail::load_int(cu_q_blocks, s + 1); ++i) {
      for (std::int64_t bh = 0; bh < batch_heads; ++bh) {
        const std::int64_t row = bh * nq + i;
        const std::int64_t count = detail::load_int(q2k_num, row);
        // Element by element, each read before its write: packed_idx may be local_idx.
        for (std::int64_t e = 0; e < max_kv; ++e)
          store_int(packed_idx, row * max_kv + e,
                    e < count ? detail::load_int(local_idx, row * max_kv + e) + kv_offset : -1);
      }
    }
  }
}

}  // namespace vsa::cpu
