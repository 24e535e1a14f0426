// GPU metadata: block map -> q2k lists, and q2k -> k2q inversion, so that
// block_sparse_attn_from_mask runs on the device with no host round trip;
// and the lists of a packed variable-length batch moved onto the packed
// sequence (pack_varlen_index).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/layout.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_guard.hpp"
#include "cuda/cuda_backend.hpp"

namespace vsa::cuda {
namespace {

__device__ __forceinline__ std::int64_t read_int(const void* p, bool is_64, std::int64_t i) {
  return is_64 ? static_cast<const long long*>(p)[i] : static_cast<const int*>(p)[i];
}
__device__ __forceinline__ void write_int(void* p, bool is_64, std::int64_t i, std::int64_t value) {
  if (is_64)
    static_cast<long long*>(p)[i] = value;
  else
    static_cast<int*>(p)[i] = static_cast<int>(value);
}

// One warp per (b, h, query block) row: a ballot over 32 columns at a time
// compacts the set bits in ascending order; the rest of the row gets -1.
__global__ void map_to_index_kernel(const std::uint8_t* map, std::int64_t rows, int nk, void* idx,
                                    void* num, bool out_is_64) {
  const std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= rows) return;
  const std::uint8_t* bits = map + row * nk;
  const std::int64_t out0 = row * nk;
  int count = 0;
  for (int base = 0; base < nk; base += 32) {
    const int j = base + lane;
    const bool set = j < nk && bits[j] != 0;
    const unsigned ballot = __ballot_sync(0xffffffffu, set);
    if (set) write_int(idx, out_is_64, out0 + count + __popc(ballot & ((1u << lane) - 1u)), j);
    count += __popc(ballot);
  }
  for (int e = count + lane; e < nk; e += 32) write_int(idx, out_is_64, out0 + e, -1);
  if (lane == 0) write_int(num, out_is_64, row, count);
}

// One CTA per (b, h). Query rows are visited in ascending order, a barrier
// between rows, so each KV block's list comes out ascending; k2q_num serves as
// the per-block cursor. Entries past a full list's capacity are dropped
// (a documented precondition on the GPU; the CPU reports it).
__global__ void invert_indices_kernel(const void* q2k_idx, bool idx_is_64, const void* q2k_num,
                                      bool num_is_64, int nq, int max_kv, int nk, void* k2q_idx,
                                      bool k2q_idx_is_64, int max_q, int* k2q_num) {
  const std::int64_t bh = blockIdx.x;
  int* cursor = k2q_num + bh * nk;
  for (int j = static_cast<int>(threadIdx.x); j < nk; j += static_cast<int>(blockDim.x)) cursor[j] = 0;
  __syncthreads();
  for (int i = 0; i < nq; ++i) {
    const std::int64_t row = bh * nq + i;
    const int count = static_cast<int>(read_int(q2k_num, num_is_64, row));
    for (int e = static_cast<int>(threadIdx.x); e < count; e += static_cast<int>(blockDim.x)) {
      const int j = static_cast<int>(read_int(q2k_idx, idx_is_64, row * max_kv + e));
      const int slot = atomicAdd(&cursor[j], 1);
      if (slot < max_q) write_int(k2q_idx, k2q_idx_is_64, (bh * nk + j) * max_q + slot, i);
    }
    __syncthreads();
  }
  for (int j = static_cast<int>(threadIdx.x); j < nk; j += static_cast<int>(blockDim.x)) {
    const int filled = min(cursor[j], max_q);
    cursor[j] = filled;
    for (int e = filled; e < max_q; ++e) write_int(k2q_idx, k2q_idx_is_64, (bh * nk + j) * max_q + e, -1);
  }
}

// One thread per list entry. The entry's query block finds its sequence by
// binary search over cu_q (the last sequence starting at or before it, which
// skips empty ones); listed ids move by that sequence's first KV block. Every
// read stays in bounds even when the offsets or counts break the documented
// preconditions: the search never leaves [0, sequences) and counts are
// clamped to [0, max_kv] before they index anything.
__global__ void pack_varlen_index_kernel(const void* local_idx, bool local_is_64, const void* num,
                                         bool num_is_64, const void* cu_q, const void* cu_kv,
                                         bool cu_is_64, int sequences, std::int64_t nq, int max_kv,
                                         std::int64_t entries, void* packed_idx, bool packed_is_64) {
  const std::int64_t entry = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (entry >= entries) return;
  const std::int64_t row = entry / max_kv;
  const int e = static_cast<int>(entry % max_kv);
  const std::int64_t query_block = row % nq;
  int lo = 0, hi = sequences - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (read_int(cu_q, cu_is_64, mid) <= query_block)
      lo = mid;
    else
      hi = mid - 1;
  }
  const std::int64_t count = min(max(read_int(num, num_is_64, row), std::int64_t{0}), std::int64_t{max_kv});
  const std::int64_t id = e < count ? read_int(local_idx, local_is_64, entry) + read_int(cu_kv, cu_is_64, lo) : -1;
  write_int(packed_idx, packed_is_64, entry, id);
}

unsigned blocks_for(std::int64_t work, int per_block) {
  return static_cast<unsigned>((work + per_block - 1) / per_block);
}

}  // namespace

void map_to_index(const TensorRef& block_map, const TensorRef& q2k_idx, const TensorRef& q2k_num,
                  void* stream) {
  const std::int64_t rows = block_map.shape[0] * block_map.shape[1] * block_map.shape[2];
  const int nk = static_cast<int>(block_map.shape[3]);
  constexpr int kThreads = 256;  // 8 rows per block
  const DeviceGuard device(block_map.device_index);
  map_to_index_kernel<<<blocks_for(rows * 32, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const std::uint8_t*>(block_map.data), rows, nk, q2k_idx.data, q2k_num.data,
      q2k_idx.dtype == DType::i64);
  check_launch("map_to_index_kernel");
}

void invert_indices(const TensorRef& q2k_idx, const TensorRef& q2k_num, std::int64_t num_kv_blocks,
                    const TensorRef& k2q_idx, const TensorRef& k2q_num, void* stream) {
  const std::int64_t bh = q2k_idx.shape[0] * q2k_idx.shape[1];
  const auto s = static_cast<cudaStream_t>(stream);
  const DeviceGuard device(q2k_idx.device_index);
  // The kernel counts with 32-bit atomics directly in k2q_num.
  if (k2q_num.dtype != DType::i32)
    throw Error(ErrorKind::unsupported, "k2q_num.dtype", "int32 on CUDA", dtype_name(k2q_num.dtype));
  int* cursors = static_cast<int*>(k2q_num.data);
  invert_indices_kernel<<<static_cast<unsigned>(bh), 256, 0, s>>>(
      q2k_idx.data, q2k_idx.dtype == DType::i64, q2k_num.data, q2k_num.dtype == DType::i64,
      static_cast<int>(q2k_idx.shape[2]), static_cast<int>(q2k_idx.shape[3]),
      static_cast<int>(num_kv_blocks), k2q_idx.data, k2q_idx.dtype == DType::i64,
      static_cast<int>(k2q_idx.shape[3]), cursors);
  check_launch("invert_indices_kernel");
}

void pack_varlen_index(const TensorRef& local_idx, const TensorRef& q2k_num, const TensorRef& cu_q_blocks,
                       const TensorRef& cu_kv_blocks, const TensorRef& packed_idx, void* stream) {
  const std::int64_t entries = local_idx.numel();
  if (entries == 0) return;
  constexpr int kThreads = 256;
  const DeviceGuard device(local_idx.device_index);
  pack_varlen_index_kernel<<<blocks_for(entries, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      local_idx.data, local_idx.dtype == DType::i64, q2k_num.data, q2k_num.dtype == DType::i64, cu_q_blocks.data,
      cu_kv_blocks.data, cu_q_blocks.dtype == DType::i64, static_cast<int>(cu_q_blocks.numel() - 1),
      local_idx.shape[2], static_cast<int>(local_idx.shape[3]), entries, packed_idx.data,
      packed_idx.dtype == DType::i64);
  check_launch("pack_varlen_index_kernel");
}

}  // namespace vsa::cuda
