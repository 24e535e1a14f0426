#include "cuda/backward/kv_lists.hpp"

#include "cuda/common/block_lists.cuh"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/smem_opt_in.hpp"

namespace vsa::cuda {
namespace {

constexpr int kThreads = 256;

// The range of query blocks (kListRanges per head, contiguous) query block r falls in, and the
// first query block of range `range`: r is in it exactly when r · kListRanges >= range · NQ.
__device__ __forceinline__ int range_of(int r, int num_q_blocks) { return r * kListRanges / num_q_blocks; }
__device__ __forceinline__ int range_begin(int range, int num_q_blocks) {
  return (range * num_q_blocks + kListRanges - 1) / kListRanges;
}

// Where list j of head bh keeps its count for query-block range `range`.
__device__ __forceinline__ int* range_count(const KvListArgs& a, std::int64_t bh, int range, int j) {
  return a.cursors + (bh * kListRanges + range) * a.num_kv_blocks + j;
}

// A list's count over all ranges (list = bh · NK + j).
__device__ __forceinline__ int list_count(const KvListArgs& a, std::int64_t list) {
  const std::int64_t bh = list / a.num_kv_blocks;
  const int j = static_cast<int>(list % a.num_kv_blocks);
  int count = 0;
#pragma unroll
  for (int range = 0; range < kListRanges; ++range) count += *range_count(a, bh, range, j);
  return count;
}

// One thread per flat entry row · max_kv + e: a listed entry (e < q2k_num) adds one to its list's
// count for its query block's range. Ids outside [0, NK) are a precondition violation; they are
// skipped rather than counted out of bounds (placement skips them too).
__global__ void count_kernel(const KvListArgs a) {
  const std::int64_t entry = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t row = entry / a.max_kv;
  if (row >= a.rows || entry % a.max_kv >= load_meta(a.q2k_num, a.num_is_64, row)) return;
  const std::int64_t j = load_meta(a.q2k_idx, a.idx_is_64, entry);
  if (j < 0 || j >= a.num_kv_blocks) return;
  const int block = static_cast<int>(row % a.num_q_blocks);
  atomicAdd(range_count(a, row / a.num_q_blocks, range_of(block, a.num_q_blocks), static_cast<int>(j)), 1);
}

// The single-CTA kernels below run 1,024 threads: one CTA-wide scan over per-thread runs, not
// rounds of a smaller CTA (7,488 lists on Wan 480p took 30 rounds of 256 and two barriers each, 22 µs).
constexpr int kScanThreads = 1024;

// The exclusive prefix sum of `value` over the CTA's threads in thread order; `total` gets the sum
// of all. Every thread of the CTA calls it (it has barriers).
__device__ int cta_exclusive_scan(int value, int& total) {
  __shared__ int warp_sums[kScanThreads / 32];
  __shared__ int sum_of_all;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  int inclusive = value;  // over the warp
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int up = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += up;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {  // the warps' totals, scanned in place (exclusive)
    const int sum = warp_sums[lane];
    int scanned = sum;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int up = __shfl_up_sync(0xffffffffu, scanned, d);
      if (lane >= d) scanned += up;
    }
    warp_sums[lane] = scanned - sum;
    if (lane == 31) sum_of_all = scanned;
  }
  __syncthreads();
  total = sum_of_all;
  return warp_sums[warp] + inclusive - value;
}

// One CTA: offsets = exclusive prefix sum of the counts, each thread taking a run of consecutive lists.
__global__ void __launch_bounds__(kScanThreads) scan_kernel(const KvListArgs a, int lists) {
  const int run = (lists + kScanThreads - 1) / kScanThreads;
  const int begin = min(static_cast<int>(threadIdx.x) * run, lists), end = min(begin + run, lists);
  int sum = 0;
  for (int i = begin; i < end; ++i) sum += list_count(a, i);
  int total = 0;
  int offset = cta_exclusive_scan(sum, total);
  if (threadIdx.x == 0) a.offsets[lists] = total;
  for (int i = begin; i < end; ++i) {
    a.offsets[i] = offset;
    offset += list_count(a, i);
  }
}

// The key pass's work order (KvListArgs::order), one CTA per (batch, kv head): its kv blocks with
// more listed query blocks (summed over the kv head's group) first. The heads stay in turn: the
// CTAs resident at once then share one head's q, dout and dQ accumulator in L2 (an order sorted
// across all heads made the backward 1.6x slower). Items are counted per bucket of their count
// (counts from kOrderBuckets − 1 up share the top bucket), the buckets scanned from the top, and
// each item placed by an atomic on its bucket's cursor: the order within a bucket may vary from
// run to run, which the results do not depend on (each key-pass CTA writes only its own dK and
// dV; dQ's order is the atomic path's or the dQ pass's, as before).
constexpr int kOrderBuckets = 4 * kScanThreads;  // 16 KB of shared memory
__global__ void __launch_bounds__(kScanThreads) order_kernel(const KvListArgs a) {
  __shared__ int cursor[kOrderBuckets];
  const int tid = static_cast<int>(threadIdx.x), nk = a.num_kv_blocks;
  const int first_item = static_cast<int>(blockIdx.x) * nk;  // item = (batch · kv heads + kv head) · NK + kv block
  const std::int64_t first_list = static_cast<std::int64_t>(blockIdx.x) * a.kv_group * nk;
  const auto bucket = [&](int j) {
    int count = 0;
    for (int g = 0; g < a.kv_group; ++g) count += list_count(a, first_list + g * nk + j);
    return min(count, kOrderBuckets - 1);
  };
  for (int b = tid; b < kOrderBuckets; b += kScanThreads) cursor[b] = 0;
  __syncthreads();
  for (int j = tid; j < nk; j += kScanThreads) atomicAdd(cursor + bucket(j), 1);
  __syncthreads();
  // Thread t owns buckets top − 4t − 3 .. top − 4t: their first positions, largest count first.
  constexpr int kOwned = kOrderBuckets / kScanThreads;
  const int top = kOrderBuckets - 1 - kOwned * tid;
  int owned[kOwned], sum = 0;
#pragma unroll
  for (int i = 0; i < kOwned; ++i) sum += owned[i] = cursor[top - i];
  int total = 0;
  int at = first_item + cta_exclusive_scan(sum, total);
#pragma unroll
  for (int i = 0; i < kOwned; ++i) {
    cursor[top - i] = at;
    at += owned[i];
  }
  __syncthreads();
  for (int j = tid; j < nk; j += kScanThreads) a.order[atomicAdd(cursor + bucket(j), 1)] = first_item + j;
}

// Placement, with no sort: one CTA per (batch·head, chunk of up to kPlaceLists lists, range of
// query blocks), its warps taking consecutive runs of the range's query blocks. Per list, a range's
// entries go after those of the ranges before it (their counts from count_kernel), warp w's after
// those of the warps before it, and within a warp in query-block order, so every list comes out
// ascending.
constexpr int kPlaceThreads = 1024;
constexpr int kPlaceWarps = kPlaceThreads / 32;
constexpr int kPlaceLists = 768;  // the warps' cursors: 32 × 768 × 4 bytes = 96 KB of shared memory
constexpr int kRowBatch = 8;      // query blocks whose entries a warp loads before placing them in order
constexpr std::size_t kPlaceSmem = sizeof(int) * kPlaceWarps * kPlaceLists;

__global__ void __launch_bounds__(kPlaceThreads) place_kernel(const KvListArgs a) {
  extern __shared__ int warp_cursors[];  // [kPlaceWarps][chunk]
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t bh = blockIdx.y;
  const int range = static_cast<int>(blockIdx.x % kListRanges);
  const int first_list = static_cast<int>(blockIdx.x / kListRanges) * kPlaceLists;
  const int chunk = min(kPlaceLists, a.num_kv_blocks - first_list);
  const int begin = range_begin(range, a.num_q_blocks), end = range_begin(range + 1, a.num_q_blocks);
  const int run = (end - begin + kPlaceWarps - 1) / kPlaceWarps;
  const int row0 = min(begin + warp * run, end), row1 = min(row0 + run, end);
  int* const cursor = warp_cursors + warp * chunk;
  for (int i = static_cast<int>(threadIdx.x); i < kPlaceWarps * chunk; i += kPlaceThreads) warp_cursors[i] = 0;
  __syncthreads();

  // Entry e of query block r: its list within the chunk, or -1 (past max_kv or q2k_num, an id
  // outside [0, NK) or another chunk's list). Both loads are issued before either is used.
  const auto chunk_list = [&](int r, int e) {
    if (e >= a.max_kv) return -1;
    const std::int64_t row = bh * a.num_q_blocks + r;
    const std::int64_t listed = load_meta(a.q2k_num, a.num_is_64, row);
    const std::int64_t j = load_meta(a.q2k_idx, a.idx_is_64, row * a.max_kv + e) - first_list;
    return e < listed && j >= 0 && j < chunk ? static_cast<int>(j) : -1;
  };
  // Every entry of the warp's query blocks, block by block in query-block order, as
  // take(list, block, entry) (__syncwarp: block r's entries are taken before block r + 1's). The first
  // 64 entries of kRowBatch blocks are loaded at once, so each lane keeps 2 · kRowBatch loads in
  // flight; a block's entries past 64 (max_kv > 64) follow in its turn, one at a time.
  const int per_lane = (a.max_kv + 31) / 32;
  const auto walk_entries = [&](auto&& take) {
    for (int r0 = row0; r0 < row1; r0 += kRowBatch) {
      int lists[kRowBatch][2];
#pragma unroll
      for (int b = 0; b < kRowBatch; ++b)
#pragma unroll
        for (int i = 0; i < 2; ++i)
          lists[b][i] = r0 + b < row1 && i < per_lane ? chunk_list(r0 + b, lane + 32 * i) : -1;
#pragma unroll
      for (int b = 0; b < kRowBatch; ++b) {
#pragma unroll
        for (int i = 0; i < 2; ++i)
          if (lists[b][i] >= 0) take(lists[b][i], r0 + b, lane + 32 * i);
        for (int e = lane + 64; r0 + b < row1 && e < a.max_kv; e += 32) {
          const int l = chunk_list(r0 + b, e);
          if (l >= 0) take(l, r0 + b, e);
        }
        __syncwarp();
      }
    }
  };
  // Counts per warp and list.
  walk_entries([&](int list, int, int) { atomicAdd(cursor + list, 1); });
  __syncthreads();
  // Each warp's first position in each list: the list's offset plus the earlier ranges' and
  // the earlier warps' counts.
  for (int l = static_cast<int>(threadIdx.x); l < chunk; l += kPlaceThreads) {
    int at = a.offsets[bh * a.num_kv_blocks + first_list + l];
    for (int earlier = 0; earlier < range; ++earlier) at += *range_count(a, bh, earlier, first_list + l);
    for (int w = 0; w < kPlaceWarps; ++w) {
      const int count = warp_cursors[w * chunk + l];
      warp_cursors[w * chunk + l] = at;
      at += count;
    }
  }
  __syncthreads();
  // Placement in query-block order.
  walk_entries([&](int list, int block, int entry) {
    const int at = atomicAdd(cursor + list, 1);
    a.blocks[at] = block;
    if (a.slots != nullptr) a.slots[(bh * a.num_q_blocks + block) * a.max_kv + entry] = at;
  });
}

}  // namespace

void build_kv_lists(const KvListArgs& a, cudaStream_t stream) {
  const int lists = static_cast<int>(a.rows / a.num_q_blocks) * a.num_kv_blocks;
  const std::int64_t entries = a.rows * a.max_kv;
  const auto entry_blocks = static_cast<unsigned>((entries + kThreads - 1) / kThreads);
  check_cuda(cudaMemsetAsync(a.cursors, 0, sizeof(int) * static_cast<std::size_t>(lists) * kListRanges, stream),
             "cudaMemsetAsync(kv list counts)");
  count_kernel<<<entry_blocks, kThreads, 0, stream>>>(a);
  check_launch("kv lists: count_kernel");
  scan_kernel<<<1, kScanThreads, 0, stream>>>(a, lists);
  check_launch("kv lists: scan_kernel");
  const dim3 place_grid(static_cast<unsigned>((a.num_kv_blocks + kPlaceLists - 1) / kPlaceLists * kListRanges),
                        static_cast<unsigned>(a.rows / a.num_q_blocks));
  allow_dynamic_smem<place_kernel>(static_cast<int>(kPlaceSmem), "cudaFuncSetAttribute(kv lists: place_kernel)");
  place_kernel<<<place_grid, kPlaceThreads, kPlaceSmem, stream>>>(a);
  check_launch("kv lists: place_kernel");
  order_kernel<<<static_cast<unsigned>(lists / a.kv_group / a.num_kv_blocks), kScanThreads, 0, stream>>>(a);
  check_launch("kv lists: order_kernel");
}

}  // namespace vsa::cuda
