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
// at their list's offset. Each thread sums a run of consecutive counts, the
// CTA scans the runs' sums once, and each thread writes its run's offsets
// (one CTA-wide scan, not one per 256 lists: 7,488 lists on Wan 480p took
// 30 rounds of two barriers each, 22 µs).
constexpr int kScanThreads = 1024;
__global__ void __launch_bounds__(kScanThreads) scan_kernel(const KvListArgs a, int lists) {
  __shared__ int warp_sums[kScanThreads / 32];
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int run = (lists + kScanThreads - 1) / kScanThreads;
  const int begin = min(static_cast<int>(threadIdx.x) * run, lists), end = min(begin + run, lists);
  int sum = 0;
  for (int i = begin; i < end; ++i) sum += a.cursors[i];
  int inclusive = sum;  // over the warp
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int up = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += up;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {  // the warps' totals, scanned in place (exclusive)
    const int total = warp_sums[lane];
    int scanned = total;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int up = __shfl_up_sync(0xffffffffu, scanned, d);
      if (lane >= d) scanned += up;
    }
    warp_sums[lane] = scanned - total;
    if (lane == 31) a.offsets[lists] = scanned;
  }
  __syncthreads();
  int offset = warp_sums[warp] + inclusive - sum;
  for (int i = begin; i < end; ++i) {
    const int count = a.cursors[i];
    a.offsets[i] = offset;
    a.cursors[i] = offset;
    offset += count;
  }
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
  scan_kernel<<<1, kScanThreads, 0, stream>>>(a, lists);
  check_launch("kv lists: scan_kernel");
  place_kernel<<<entry_blocks, kThreads, 0, stream>>>(a);
  check_launch("kv lists: place_kernel");
  sort_kernel<<<static_cast<unsigned>(lists), kThreads, 0, stream>>>(a);
  check_launch("kv lists: sort_kernel");
}

}  // namespace vsa::cuda
