// The gate combine (out = fine + coarse · gate) and its gradient on the GPU.
// Memory-bound: the forward reads fine and gate once and writes out once
// (one thread per 8 columns of a token; the block's coarse row comes from
// L1/L2); the backward walks each block's tokens in one thread per 8
// columns, so dcoarse is a plain in-register sum (no atomics, deterministic).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

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

struct CombineParams {
  const void* fine;  // forward; the backward's dout
  const void* gate;  // null: no gate
  void* out;         // forward; the backward's dgate (null without a gate)
  SeqStrides fine_stride, gate_stride, out_stride;
  const float* coarse;  // [B, H, NQ, D]
  float* dcoarse;       // backward
  int heads, blocks, block, groups;
  std::int64_t seq;
};

template <class Elem>
__global__ void __launch_bounds__(kThreads) gate_combine_kernel(const CombineParams p, std::int64_t work) {
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= work) return;
  const int group = static_cast<int>(index % p.groups);
  const std::int64_t token = index / p.groups;
  const std::int64_t seq = token % p.seq, bh = token / p.seq;
  const std::int64_t batch = bh / p.heads, head = bh % p.heads;
  float fine[8], coarse[8], gate[8] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  layer::load8(static_cast<const Elem*>(p.fine) + layer::token_offset(p.fine_stride, batch, head, seq) + 8 * group,
               fine);
  layer::load8(p.coarse + (bh * p.blocks + seq / p.block) * (8 * p.groups) + 8 * group, coarse);
  if (p.gate != nullptr)
    layer::load8(static_cast<const Elem*>(p.gate) + layer::token_offset(p.gate_stride, batch, head, seq) + 8 * group,
                 gate);
  // The step the fine kernels' fused epilogue uses too (sm80/fwd_epilogue.cuh).
#pragma unroll
  for (int e = 0; e < 8; ++e) fine[e] = detail::combine_step(fine[e], coarse[e], gate[e]);
  layer::store8(static_cast<Elem*>(p.out) + layer::token_offset(p.out_stride, batch, head, seq) + 8 * group, fine);
}

template <class Elem>
__global__ void __launch_bounds__(kThreads) gate_combine_backward_kernel(const CombineParams p, std::int64_t work) {
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= work) return;
  const int group = static_cast<int>(index % p.groups);
  const std::int64_t item = index / p.groups;  // (batch, head, block)
  const std::int64_t bh = item / p.blocks, first = (item % p.blocks) * p.block;
  const std::int64_t batch = bh / p.heads, head = bh % p.heads;
  const std::int64_t coarse_offset = item * (8 * p.groups) + 8 * group;
  const Elem* dout = static_cast<const Elem*>(p.fine) + layer::token_offset(p.fine_stride, batch, head, first) + 8 * group;
  float sum[8] = {};
  if (p.gate == nullptr) {
#pragma unroll 8
    for (int t = 0; t < p.block; ++t) {
      float grad[8];
      layer::load8(dout + t * p.fine_stride.seq, grad);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum[e] += grad[e];
    }
  } else {
    float coarse[8];
    layer::load8(p.coarse + coarse_offset, coarse);
    const Elem* gate = static_cast<const Elem*>(p.gate) + layer::token_offset(p.gate_stride, batch, head, first) + 8 * group;
    Elem* dgate = static_cast<Elem*>(p.out) + layer::token_offset(p.out_stride, batch, head, first) + 8 * group;
#pragma unroll 4
    for (int t = 0; t < p.block; ++t) {
      float grad[8], g[8];
      layer::load8(dout + t * p.fine_stride.seq, grad);
      layer::load8(gate + t * p.gate_stride.seq, g);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        sum[e] = fmaf(grad[e], g[e], sum[e]);
        g[e] = grad[e] * coarse[e];
      }
      layer::store8(dgate + t * p.out_stride.seq, g);
    }
  }
  layer::store8(p.dcoarse + coarse_offset, sum);
}

// Shapes and strides shared by both directions: `x` is fine (forward) or
// dout (backward), `out` is out or dgate.
CombineParams combine_params(const TensorRef& x, const char* x_name, const TensorRef& coarse,
                             const TensorRef& gate, const TensorRef& out, const char* out_name,
                             Layout layout) {
  layer::require_kernel_rows(x, x_name, layout);
  layer::require_aligned_blocks(coarse, "coarse");
  const detail::HeadView v = detail::head_view(x, layout);
  CombineParams p{};
  p.fine = x.data;
  p.fine_stride = seq_strides(x, layout);
  if (gate.defined()) {
    layer::require_kernel_rows(gate, "gate", layout);
    p.gate = gate.data;
    p.gate_stride = seq_strides(gate, layout);
  }
  if (out.defined()) {
    layer::require_kernel_rows(out, out_name, layout);
    p.out = out.data;
    p.out_stride = seq_strides(out, layout);
  }
  p.coarse = static_cast<const float*>(coarse.data);
  p.heads = static_cast<int>(v.heads);
  p.blocks = static_cast<int>(coarse.shape[2]);
  p.block = static_cast<int>(v.seq / coarse.shape[2]);
  p.groups = static_cast<int>(v.dim / 8);
  p.seq = v.seq;
  return p;
}

}  // namespace

void gate_combine(const GateCombineParams& params) {
  const CombineParams p = combine_params(params.fine, "fine", params.coarse, params.gate, params.out, "out",
                                         params.layout);
  const std::int64_t work = params.fine.numel() / 8;
  const DeviceGuard device(params.fine.device_index);
  const auto stream = static_cast<cudaStream_t>(params.stream);
  if (params.fine.dtype == DType::bf16)
    gate_combine_kernel<__nv_bfloat16><<<ctas_for(work), kThreads, 0, stream>>>(p, work);
  else
    gate_combine_kernel<__half><<<ctas_for(work), kThreads, 0, stream>>>(p, work);
  check_launch("gate_combine_kernel");
}

void gate_combine_backward(const GateCombineBackwardParams& params) {
  CombineParams p = combine_params(params.dout, "dout", params.coarse, params.gate, params.dgate, "dgate",
                                   params.layout);
  layer::require_aligned_blocks(params.dcoarse, "dcoarse");
  p.dcoarse = static_cast<float*>(params.dcoarse.data);
  const std::int64_t work = params.dcoarse.numel() / 8;
  const DeviceGuard device(params.dout.device_index);
  const auto stream = static_cast<cudaStream_t>(params.stream);
  if (params.dout.dtype == DType::bf16)
    gate_combine_backward_kernel<__nv_bfloat16><<<ctas_for(work), kThreads, 0, stream>>>(p, work);
  else
    gate_combine_backward_kernel<__half><<<ctas_for(work), kThreads, 0, stream>>>(p, work);
  check_launch("gate_combine_backward_kernel");
}

}  // namespace vsa::cuda
