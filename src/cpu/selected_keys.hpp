// What one query block attends to: its coordinates, and the valid key/value
// rows of the blocks its list names, gathered into dense float matrices.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/check.hpp"
#include "core/layout.hpp"
#include "cpu/matmul.hpp"
#include "cpu/scratch.hpp"
#include "cpu/sequence_rows.hpp"

namespace vsa::cpu {

// Scores are kept in base 2 (s * scale * log2 e) so softmax uses exp2 and the
// LSE comes out in base 2, as the contract requires.
constexpr float kLog2e = 1.4426950408889634f;

// Query block `index` of head `head` in batch `batch`. Work items are
// numbered like the rows of q2k_num ([B, H, NQ] flattened), so the item
// number is also the flat row of this block's list.
struct QueryBlock {
  std::int64_t batch, head, kv_head, index;
  std::int64_t list_row;
};

inline QueryBlock query_block(std::int64_t item, const ProblemShape& s) {
  const std::int64_t index = item % s.num_q_blocks;
  const std::int64_t head = (item / s.num_q_blocks) % s.heads;
  const std::int64_t batch = item / (s.num_q_blocks * s.heads);
  const std::int64_t group = s.heads / s.kv_heads;  // query heads sharing one kv head (GQA)
  return QueryBlock{batch, head, head / group, index, item};
}

// How many of the block's first rows are real queries: q_variable_block_sizes
// of its query block, or every row without it. The rest are padding, which
// the backend writes as empty rows without computing them.
inline std::int64_t real_query_rows(const AttentionInputs& in, const ProblemShape& s, const QueryBlock& qb) {
  return in.q_variable_block_sizes.defined() ? detail::load_int(in.q_variable_block_sizes, qb.index) : s.block;
}

// Refuses lists naming more valid keys in one query block than a matrix
// product takes (kMaxMatmulExtent): S = Q·Kᵀ has a column per key, and the
// key count is that product's n and leading dimension and P·V's k. Such a list
// (2^31 keys: duplicates count, or a sequence of 2^31 tokens listed whole)
// would otherwise reach OpenBLAS wrapped and give wrong rows silently. Checked
// before any work, on validated metadata; a loop over the lists only when their
// capacity (max_kv full blocks) could pass the limit.
inline void check_listed_keys(const AttentionInputs& in, const ProblemShape& s) {
  if (s.max_kv <= kMaxMatmulExtent / s.block) return;
  const std::int64_t rows = s.batch * s.heads * s.num_q_blocks;
  for (std::int64_t row = 0; row < rows; ++row) {
    std::int64_t count = 0;
    const std::int64_t listed = detail::load_int(in.q2k_num, row);
    for (std::int64_t e = 0; e < listed && count <= kMaxMatmulExtent; ++e)
      count += detail::load_int(in.variable_block_sizes, detail::load_int(in.q2k_idx, row * s.max_kv + e));
    if (count > kMaxMatmulExtent)
      detail::fail_unsupported("q2k_idx",
                               "lists naming at most 2^31 - 1 valid keys per query block on the CPU "
                               "(variable_block_sizes of the listed blocks summed, duplicates included: "
                               "its BLAS takes int sizes)",
                               "at least " + std::to_string(count) + " at flat row " + std::to_string(row));
  }
}

// Keys and values of every valid token the block attends to, one D-row each,
// in list order (row-major [count, D], in the thread's scratch). A block
// listed twice appears twice (documented contract).
struct SelectedKeys {
  const float* keys = nullptr;
  const float* values = nullptr;
  std::int64_t count = 0;
};

template <class T>
SelectedKeys gather_selected_keys(const SequenceRows<const T>& k, const SequenceRows<const T>& v,
                                  const AttentionInputs& in, const ProblemShape& s, const QueryBlock& qb,
                                  Scratch& scratch) {
  const std::int64_t listed = detail::load_int(in.q2k_num, qb.list_row);
  std::int64_t count = 0;
  for (std::int64_t e = 0; e < listed; ++e)
    count += detail::load_int(in.variable_block_sizes, detail::load_int(in.q2k_idx, qb.list_row * s.max_kv + e));
  const std::int64_t d = s.head_dim;
  float* keys = scratch.keys.get(count * d);
  float* values = scratch.values.get(count * d);
  std::int64_t filled = 0;
  for (std::int64_t e = 0; e < listed; ++e) {
    const std::int64_t block = detail::load_int(in.q2k_idx, qb.list_row * s.max_kv + e);
    const std::int64_t valid = detail::load_int(in.variable_block_sizes, block);
    const std::int64_t first = block * s.block;
    if (valid == 0) continue;  // nothing to copy (and memcpy takes no null buffer, even for 0 bytes)
    if constexpr (std::is_same_v<T, float>) {
      if (k.view.stride_seq == d && v.view.stride_seq == d) {  // packed rows: one copy per block
        const auto bytes = static_cast<std::size_t>(valid * d) * sizeof(float);
        std::memcpy(keys + filled * d, k.row(qb.batch, qb.kv_head, first), bytes);
        std::memcpy(values + filled * d, v.row(qb.batch, qb.kv_head, first), bytes);
        filled += valid;
        continue;
      }
    }
    for (std::int64_t t = 0; t < valid; ++t, ++filled) {
      load_row(k.row(qb.batch, qb.kv_head, first + t), keys + filled * d, d);
      load_row(v.row(qb.batch, qb.kv_head, first + t), values + filled * d, d);
    }
  }
  return SelectedKeys{keys, values, count};
}

// Rows [first, first + count) of (batch, head) as a float [count, D] matrix
// with leading dimension ld.
struct FloatRows {
  const float* data;
  std::int64_t ld;
};

// Float tensors whose rows do not overlap are read in place (a matrix
// product takes any leading dimension of at least D); other element types,
// and overlapping rows (a seq stride below D, such as an expanded tensor),
// are converted into `dst`.
template <class T>
FloatRows float_rows(const SequenceRows<const T>& src, std::int64_t batch, std::int64_t head, std::int64_t first,
                     std::int64_t count, std::int64_t d, ScratchBuffer& dst) {
  if constexpr (std::is_same_v<T, float>) {
    // The matmul's leading dimensions are ints.
    if (src.view.stride_seq >= d && src.view.stride_seq <= kMaxMatmulExtent)
      return FloatRows{src.row(batch, head, first), src.view.stride_seq};
  }
  float* m = dst.get(count * d);
  for (std::int64_t r = 0; r < count; ++r) load_row(src.row(batch, head, first + r), m + r * d, d);
  return FloatRows{m, d};
}

// Where a work item's float result rows [first, first + count) go: float
// outputs whose rows do not overlap are written in place (the product's
// leading dimension is the seq stride), saving a copy; other element types
// are computed in `scratch` and converted by the caller (store_row).
struct FloatOutRows {
  float* data;
  std::int64_t ld;
  bool in_place;
};

template <class T>
FloatOutRows float_out_rows(const SequenceRows<T>& dst, std::int64_t batch, std::int64_t head, std::int64_t first,
                            std::int64_t d, float* scratch) {
  if constexpr (std::is_same_v<T, float>) {
    if (dst.view.stride_seq >= d && dst.view.stride_seq <= kMaxMatmulExtent)
      return FloatOutRows{dst.row(batch, head, first), dst.view.stride_seq, true};
  }
  return FloatOutRows{scratch, d, false};
}

}  // namespace vsa::cpu
