// Block means over valid tokens and their gradient on the GPU. A thread owns
// 8 columns (16 bytes) of one (batch, head, block) and walks the block's
// valid tokens in order, summing in float64 exactly as the CPU backend does
// (core/layer_arithmetic.hpp): the means are bit-identical. Pad tokens are
// never read. Memory-bound: each valid input element is read once.
// block_means runs the layer's q, k and v in one launch (MeanParts).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>

#include "core/layer_arithmetic.hpp"
#include "core/layout.hpp"
#include "cuda/common/cuda_check.hpp"
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

// Loads in flight per thread before their sums (in token order) are taken.
// Four, at four CTAs per SM (62 registers): the whole Wan 480p grid is
// resident at once. Eight loads took 86 registers, two CTAs per SM and 1.77
// waves, and reached 2.83 TB/s (bench/results/2026-12-01-h200-ce77c36).
constexpr int kUnroll = 4;

// The means of up to three tensors in one launch (block_means: a launch of
// one tensor fills less than one wave, so three ramp down three times). Part
// i takes the CTAs from first_cta[i] on, one thread per 8 columns of a block.
constexpr int kMaxMeanParts = 3;
struct MeanParts {
  MeanParams part[kMaxMeanParts];
  std::int64_t work[kMaxMeanParts];  // threads with work in each part
  unsigned first_cta[kMaxMeanParts];
  int count;
};

template <class Elem>
__global__ void __launch_bounds__(kThreads, 4) block_mean_kernel(const MeanParts parts) {
  int i = 0;
  while (i + 1 < parts.count && blockIdx.x >= parts.first_cta[i + 1]) ++i;
  const MeanParams& p = parts.part[i];
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x - parts.first_cta[i]) * blockDim.x + threadIdx.x;
  if (index >= parts.work[i]) return;
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
  double sum[8] = {};
  for (int t0 = 0; t0 < count; t0 += kUnroll) {
    uint4 raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (t0 + u < count) raw[u] = *reinterpret_cast<const uint4*>(src + (t0 + u) * p.stride.seq);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (t0 + u >= count) break;
      const std::uint32_t words[4] = {raw[u].x, raw[u].y, raw[u].z, raw[u].w};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const float2 pair = ElemTraits<Elem>::unpack(words[w]);
        sum[2 * w] = detail::mean_sum_step(sum[2 * w], pair.x);
        sum[2 * w + 1] = detail::mean_sum_step(sum[2 * w + 1], pair.y);
      }
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

// A tensor whose means a launch computes, with the argument names its errors give.
struct MeanPart {
  const BlockMeanParams* params;
  const char* x_name;
  const char* mean_name;
};

// One launch for every part; the core checked that they share a device, dtype and stream.
void launch_means(std::initializer_list<MeanPart> list) {
  MeanParts parts{};
  unsigned ctas = 0;
  for (const auto& [params, x_name, mean_name] : list) {
    layer::require_kernel_rows(params->x, x_name, params->layout);
    layer::require_aligned_blocks(params->mean, mean_name);
    MeanParams& p = parts.part[parts.count];
    p = mean_params(params->x, params->valid_counts, params->layout);
    p.x = params->x.data;
    p.mean = static_cast<float*>(params->mean.data);
    parts.work[parts.count] = params->mean.numel() / 8;
    parts.first_cta[parts.count] = ctas;
    ctas += ctas_for(parts.work[parts.count]);
    ++parts.count;
  }
  const BlockMeanParams& first = *list.begin()->params;
  const DeviceGuard device(first.x.device_index);
  const auto stream = static_cast<cudaStream_t>(first.stream);
  if (first.x.dtype == DType::bf16)
    block_mean_kernel<__nv_bfloat16><<<ctas, kThreads, 0, stream>>>(parts);
  else
    block_mean_kernel<__half><<<ctas, kThreads, 0, stream>>>(parts);
  check_launch("block_mean_kernel");
}

}  // namespace

void block_mean(const BlockMeanParams& params) { launch_means({{&params, "x", "mean"}}); }

void block_means(const BlockMeansParams& params) {
  launch_means({{&params.q, "q.x", "q.mean"}, {&params.k, "k.x", "k.mean"}, {&params.v, "v.x", "v.mean"}});
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
