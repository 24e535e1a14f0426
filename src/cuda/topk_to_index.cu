// topk_to_index on the GPU: each (b, h, query block) row of K block ids is
// sorted ascending by rank counting. One CTA per row stages the row in shared
// memory (so the output may alias the input), then every id finds its rank
// among the K: the number of ids smaller than it, plus equal ids earlier in
// the row, which keeps duplicates and makes every rank distinct. O(K^2 /
// threads) per row, negligible next to the attention for the top-k of VSA.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_guard.hpp"
#include "cuda/common/smem_opt_in.hpp"
#include "cuda/cuda_backend.hpp"

namespace vsa::cuda {
namespace {

__global__ void topk_to_index_kernel(const void* topk, bool topk_is_64, int k, void* idx, void* num,
                                     bool out_is_64) {
  extern __shared__ long long row_ids[];
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * k;
  for (int e = static_cast<int>(threadIdx.x); e < k; e += static_cast<int>(blockDim.x))
    row_ids[e] = topk_is_64 ? static_cast<const long long*>(topk)[first + e] : static_cast<const int*>(topk)[first + e];
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < k; e += static_cast<int>(blockDim.x)) {
    const long long id = row_ids[e];
    int rank = 0;
    for (int other = 0; other < k; ++other) {
      const long long o = row_ids[other];
      rank += (o < id || (o == id && other < e)) ? 1 : 0;
    }
    if (out_is_64)
      static_cast<long long*>(idx)[first + rank] = id;
    else
      static_cast<int*>(idx)[first + rank] = static_cast<int>(id);
  }
  if (threadIdx.x == 0) {
    if (out_is_64)
      static_cast<long long*>(num)[blockIdx.x] = k;
    else
      static_cast<int*>(num)[blockIdx.x] = k;
  }
}

}  // namespace

void topk_to_index(const TensorRef& topk, const TensorRef& q2k_idx, const TensorRef& q2k_num, void* stream) {
  const std::int64_t rows = topk.shape[0] * topk.shape[1] * topk.shape[2];
  const int k = static_cast<int>(topk.shape[3]);
  const DeviceGuard device(topk.device_index);
  // Two ids of slack: nvcc reads the row's tail in 16-byte pairs, one id past
  // the last when K is odd — a read compute-sanitizer memcheck reported as out
  // of bounds (H200, 2026-11-30). The slack is never written or used.
  const std::size_t smem = static_cast<std::size_t>(k + 2) * sizeof(long long);
  int max_smem = 0;
  check_cuda(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, topk.device_index),
             "cudaDeviceGetAttribute(shared memory)");
  if (smem > static_cast<std::size_t>(max_smem))
    throw Error(ErrorKind::unsupported, "topk.shape",
                "at most " + std::to_string(max_smem / sizeof(long long) - 2) + " ids per row on this GPU",
                topk.shape_string());
  if (rows == 0) return;
  allow_dynamic_smem<topk_to_index_kernel>(static_cast<int>(smem), "cudaFuncSetAttribute(topk_to_index_kernel)");
  const int threads = k >= 256 ? 256 : (k + 31) / 32 * 32;
  topk_to_index_kernel<<<static_cast<unsigned>(rows), threads, smem, static_cast<cudaStream_t>(stream)>>>(
      topk.data, topk.dtype == DType::i64, k, q2k_idx.data, q2k_num.data, q2k_idx.dtype == DType::i64);
  check_launch("topk_to_index_kernel");
}

}  // namespace vsa::cuda
