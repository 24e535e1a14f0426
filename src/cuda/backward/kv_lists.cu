#include "cuda/backward/kv_lists.hpp"

#include <climits>

#include "cuda/common/block_lists.cuh"
#include "cuda/common/cuda_check.hpp"

namespace vsa::cuda {
namespace {

constexpr int kThreads = 256;
// Lists up to this length are sorted in shared memory (16 KB); longer ones
// (more than 4096 visits of one KV block by one head) by rank, in O(n²).
constexpr int kSortCapacity = 4096;

// Calls visit(list, query block) for every listed entry (e < q2k_num) of
// the flat entry `entry` = row · max_kv + e. Ids outside [0, NK) are a
// precondition violation; they are skipped rather than written out of bounds.
template <class Visit>
__device__ __forceinline__ void for_listed_entry(const KvListArgs& a, std::int64_t entry, Visit visit) {
  const std::int64_t row = entry / a.max_kv;
  if (row >= a.rows || entry % a.max_kv >= load_meta(a.q2k_num, a.num_is_64, row)) return;
  const std::int64_t j = load_meta(a.q2k_idx, a.idx_is_64, entry);
  if (j < 0 || j >= a.num_kv_blocks) return;
  const std::int64_t bh = row / a.num_q_blocks;
  visit(static_cast<int>(bh * a.num_kv_blocks + j), static_cast<int>(row % a.num_q_blocks));
}

__global__ void count_kernel(const KvListArgs a) {
  const std::int64_t entry = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for_listed_entry(a, entry, [&](int list, int) { atomicAdd(a.cursors + list, 1); });
}

// One CTA: offsets = exclusive prefix sum of the counts; the cursors start
// at their list's offset.
__global__ void scan_kernel(const KvListArgs a, int lists) {
  __shared__ int warp_sums[kThreads / 32];
  __shared__ int carry;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < lists; base += kThreads) {
    const int i = base + static_cast<int>(threadIdx.x);
    const int count = i < lists ? a.cursors[i] : 0;
    int inclusive = count;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int up = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d) inclusive += up;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    int before = carry;
    for (int w = 0; w < warp; ++w) before += warp_sums[w];
    const int offset = before + inclusive - count;
    if (i < lists) {
      a.offsets[i] = offset;
      a.cursors[i] = offset;
    }
    __syncthreads();  // every thread has read carry and warp_sums
    if (threadIdx.x == kThreads - 1) carry = offset + count;
    __syncthreads();
  }
  if (threadIdx.x == 0) a.offsets[lists] = carry;
}

__global__ void place_kernel(const KvListArgs a) {
  const std::int64_t entry = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for_listed_entry(a, entry, [&](int list, int q_block) { a.unsorted[atomicAdd(a.cursors + list, 1)] = q_block; });
}

// One CTA per list: its entries, placed in arbitrary order, sorted ascending.
__global__ void sort_kernel(const KvListArgs a) {
  __shared__ int keys[kSortCapacity];
  const int begin = a.offsets[blockIdx.x];
  const int n = a.offsets[blockIdx.x + 1] - begin;
  const int* in = a.unsorted + begin;
  int* out = a.blocks + begin;
  if (n > kSortCapacity) {  // rank sort: equal ids are interchangeable, so ties go by position
    for (int i = static_cast<int>(threadIdx.x); i < n; i += kThreads) {
      const int x = in[i];
      int rank = 0;
      for (int k = 0; k < n; ++k) rank += in[k] < x || (in[k] == x && k < i);
      out[rank] = x;
    }
    return;
  }
  int padded = 1;
  while (padded < n) padded *= 2;
  for (int i = static_cast<int>(threadIdx.x); i < padded; i += kThreads) keys[i] = i < n ? in[i] : INT_MAX;
  __syncthreads();
  for (int size = 2; size <= padded; size *= 2) {  // bitonic sort
    for (int stride = size / 2; stride > 0; stride /= 2) {
      for (int i = static_cast<int>(threadIdx.x); i < padded; i += kThreads) {
        const int partner = i ^ stride;
        if (partner > i) {
          const bool ascending = (i & size) == 0;
          if ((keys[i] > keys[partner]) == ascending) {
            const int t = keys[i];
            keys[i] = keys[partner];
            keys[partner] = t;
          }
        }
      }
      __syncthreads();
    }
  }
  for (int i = static_cast<int>(threadIdx.x); i < n; i += kThreads) out[i] = keys[i];
}

}  // namespace

void build_kv_lists(const KvListArgs& a, cudaStream_t stream) {
  const int lists = static_cast<int>(a.rows / a.num_q_blocks) * a.num_kv_blocks;
  const std::int64_t entries = a.rows * a.max_kv;
  const auto entry_blocks = static_cast<unsigned>((entries + kThreads - 1) / kThreads);
  check_cuda(cudaMemsetAsync(a.cursors, 0, sizeof(int) * static_cast<std::size_t>(lists), stream),
             "cudaMemsetAsync(kv list counts)");
  count_kernel<<<entry_blocks, kThreads, 0, stream>>>(a);
  check_launch("kv lists: count_kernel");
  scan_kernel<<<1, kThreads, 0, stream>>>(a, lists);
  check_launch("kv lists: scan_kernel");
  place_kernel<<<entry_blocks, kThreads, 0, stream>>>(a);
  check_launch("kv lists: place_kernel");
  sort_kernel<<<static_cast<unsigned>(lists), kThreads, 0, stream>>>(a);
  check_launch("kv lists: sort_kernel");
}

}  // namespace vsa::cuda
