// Block means over valid tokens and their gradient on the GPU. A thread owns
// 8 columns (16 bytes) of one (batch, head, block) and walks the block's
// valid tokens in order, summing in float64 exactly as the CPU backend does
// (core/layer_arithmetic.hpp): the means are bit-identical. Pad tokens are
// never read. Memory-bound: each valid input element is read once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "core/layer_arithmetic.hpp"
#include "core/layout.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/ptx.cuh"
#include "cuda/common/device_guard.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/layer/launch_checks.hpp"
#include "cuda/layer/vector_io.cuh"

namespace vsa::cuda {
namespace {

using layer::ctas_for;
using layer::kThreads;

struct MeanParams {
  const void* x;       // block_mean: the input; backward: unused
  void* dx;            // backward: the output
  SeqStrides stride;   // of x or dx
  float* mean;         // block_mean: the output
  const float* dmean;  // backward: the input
  const void* counts;
  bool counts_is_64;
  int heads, blocks, block, groups;  // groups: D / 8 column groups per row
  std::int64_t seq;
};

// Rows in flight per thread: each thread streams its block's rows through a
// ring of kRing 16-byte slots in shared memory (cp.async), kRing - 1 rows
// ahead of its sums. In registers the bytes in flight are bounded by the
// register file: four loads per thread at four CTAs per SM (62 registers)
// reached ~3.9 TB/s of the whole tensor (ncu, 31 µs per Wan 480p tensor);
// eight took 86 registers, two CTAs per SM and no more bytes in flight.
// The ring holds 11 rows per thread in flight, 176 KB per SM, in 48 KB per CTA.
constexpr int kRing = 12;
constexpr std::size_t kRingBytes = sizeof(uint4) * kRing * kThreads;

template <class Elem>
__global__ void __launch_bounds__(kThreads, 4) block_mean_kernel(const MeanParams p, std::int64_t work) {
  extern __shared__ uint4 rings[];  // slot s of thread i at rings[s * kThreads + i]: no bank conflicts
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= work) return;
  const int group = static_cast<int>(index % p.groups);
  const std::int64_t item = index / p.groups;  // (batch, head, block)
  const int n = static_cast<int>(item % p.blocks);
  const std::int64_t bh = item / p.blocks;
  // Counts outside [0, blk] are a checked error on the CPU; here they are
  // clamped so no read leaves the block.
  const std::int64_t stored = layer::read_count(p.counts, p.counts_is_64, n);
  const int count = static_cast<int>(stored < 0 ? 0 : stored > p.block ? p.block : stored);
  const Elem* src = static_cast<const Elem*>(p.x) +
                    layer::token_offset(p.stride, bh / p.heads, bh % p.heads,
                                        static_cast<std::int64_t>(n) * p.block) +
                    8 * group;
  uint4* const ring = rings + threadIdx.x;
  // Row t goes to slot t % kRing in commit group t (one group per row, empty past the count,
  // so that waiting for all but the newest kRing - 1 groups means row t has landed).
  const auto fetch = [&](int t) {
    if (t < count) ptx::cp_async_16(ptx::smem_addr(ring + t % kRing * kThreads), src + t * p.stride.seq);
    ptx::cp_async_commit();
  };
#pragma unroll
  for (int t = 0; t < kRing - 1; ++t) fetch(t);
  double sum[8] = {};
  for (int t = 0; t < count; ++t) {
    // Into the slot of row t - 1, whose sums the previous iteration took.
    fetch(t + kRing - 1);
    ptx::cp_async_wait<kRing - 1>();
    const uint4 raw = ring[t % kRing * kThreads];
    const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float2 pair = ElemTraits<Elem>::unpack(words[w]);
      sum[2 * w] = detail::mean_sum_step(sum[2 * w], pair.x);
      sum[2 * w + 1] = detail::mean_sum_step(sum[2 * w + 1], pair.y);
    }
  }
  float mean[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) mean[e] = detail::mean_from_sum(sum[e], count);
  layer::store8(p.mean + item * (8 * p.groups) + 8 * group, mean);
}

// One thread per 8 columns of one token: dmean / count on valid tokens, 0 on
// pad tokens.
template <class Elem>
__global__ void __launch_bounds__(kThreads) block_mean_backward_kernel(const MeanParams p, std::int64_t work) {
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= work) return;
  const int group = static_cast<int>(index % p.groups);
  const std::int64_t token = index / p.groups;  // (batch, head, seq)
  const std::int64_t seq = token % p.seq, bh = token / p.seq;
  const int n = static_cast<int>(seq / p.block);
  const std::int64_t count = layer::read_count(p.counts, p.counts_is_64, n);
  float grad[8] = {};
  if (seq - static_cast<std::int64_t>(n) * p.block < count) {
    layer::load8(p.dmean + (bh * p.blocks + n) * (8 * p.groups) + 8 * group, grad);
    const auto divisor = static_cast<float>(count);
#pragma unroll
    for (int e = 0; e < 8; ++e) grad[e] = __fdiv_rn(grad[e], divisor);
  }
  layer::store8(static_cast<Elem*>(p.dx) + layer::token_offset(p.stride, bh / p.heads, bh % p.heads, seq) + 8 * group,
                grad);
}

MeanParams mean_params(const TensorRef& x, const TensorRef& counts, Layout layout) {
  const detail::HeadView v = detail::head_view(x, layout);
  MeanParams p{};
  p.stride = seq_strides(x, layout);
  p.counts = counts.data;
  p.counts_is_64 = counts.dtype == DType::i64;
  p.heads = static_cast<int>(v.heads);
  p.blocks = static_cast<int>(counts.shape[0]);
  p.block = static_cast<int>(v.seq / counts.shape[0]);
  p.groups = static_cast<int>(v.dim / 8);
  p.seq = v.seq;
  return p;
}

}  // namespace

void block_mean(const BlockMeanParams& params) {
  layer::require_kernel_rows(params.x, "x", params.layout);
  layer::require_aligned_blocks(params.mean, "mean");
  MeanParams p = mean_params(params.x, params.valid_counts, params.layout);
  p.x = params.x.data;
  p.mean = static_cast<float*>(params.mean.data);
  const std::int64_t work = params.mean.numel() / 8;
  const DeviceGuard device(params.x.device_index);
  const auto stream = static_cast<cudaStream_t>(params.stream);
  if (params.x.dtype == DType::bf16)
    block_mean_kernel<__nv_bfloat16><<<ctas_for(work), kThreads, kRingBytes, stream>>>(p, work);
  else
    block_mean_kernel<__half><<<ctas_for(work), kThreads, kRingBytes, stream>>>(p, work);
  check_launch("block_mean_kernel");
}

void block_mean_backward(const BlockMeanBackwardParams& params) {
  layer::require_kernel_rows(params.dx, "dx", params.layout);
  layer::require_aligned_blocks(params.dmean, "dmean");
  MeanParams p = mean_params(params.dx, params.valid_counts, params.layout);
  p.dx = params.dx.data;
  p.dmean = static_cast<const float*>(params.dmean.data);
  const std::int64_t work = params.dx.numel() / 8;
  const DeviceGuard device(params.dx.device_index);
  const auto stream = static_cast<cudaStream_t>(params.stream);
  if (params.dx.dtype == DType::bf16)
    block_mean_backward_kernel<__nv_bfloat16><<<ctas_for(work), kThreads, 0, stream>>>(p, work);
  else
    block_mean_backward_kernel<__half><<<ctas_for(work), kThreads, 0, stream>>>(p, work);
  check_launch("block_mean_backward_kernel");
}

}  // namespace vsa::cuda
