// What every attention kernel knows about blocks: the 64-key tile it steps
// through K/V (and Q in the backward) by, and how block metadata is read —
// int32 or int64 as the caller stored it, through the read-only cache.
#pragma once

#include <cstdint>

namespace vsa::cuda {

constexpr int kTileRows = 64;  // rows per K/V (and backward Q) tile; a 128-token block is two

__device__ __forceinline__ std::int64_t load_meta(const void* p, bool is_64, std::int64_t i) {
  return is_64 ? __ldg(static_cast<const long long*>(p) + i)
               : static_cast<std::int64_t>(__ldg(static_cast<const int*>(p) + i));
}

// Of `rows` rows from row `offset` of a query block holding `count` real queries, how many are
// real (the rest are padding). May be <= 0: no real row.
__device__ __forceinline__ int real_rows_from(int count, int offset, int rows) {
  const int real = count - offset;
  return real < rows ? real : rows;
}

// Rows [0, result) of the `rows`-row tile that starts `offset` rows into
// query block `q_block` are real queries (q_variable_block_sizes; q_vbs null:
// every row); the rest are padding. May be <= 0: no real row.
__device__ __forceinline__ int real_query_rows(const void* q_vbs, bool is_64, std::int64_t q_block, int offset,
                                               int rows) {
  if (q_vbs == nullptr) return rows;
  return real_rows_from(static_cast<int>(load_meta(q_vbs, is_64, q_block)), offset, rows);
}

// Real queries in query block `q_block` of `block` rows (q_vbs null: all of them).
__device__ __forceinline__ int query_block_count(const void* q_vbs, bool is_64, std::int64_t q_block, int block) {
  return q_vbs == nullptr ? block : static_cast<int>(load_meta(q_vbs, is_64, q_block));
}

}  // namespace vsa::cuda
