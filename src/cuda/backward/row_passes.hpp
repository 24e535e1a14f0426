// The backward's two passes over query rows, around the main kernel:
//   before: delta = rowsum(dO ∘ O), one fp32 per row, which dS = P ∘ (dP − delta) needs;
//   after:  dq = scale · dq_accum, the fp32 sums of dS·K (in fragment order,
//           common/dq_accum.cuh), plus the dq_mean addend, rounded into the
//           caller's dq rows.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/kernel_params.hpp"

namespace vsa::cuda {

struct RowPassParams {
  const void* out;
  const void* dout;
  void* dq;
  SeqStrides out_stride, dout_stride, dq_stride;
  float* delta;     // [B, H, Sq]
  float* dq_accum;  // [B, H, Sq, D]
  int batch, heads;
  std::int64_t seq_q;
  float scale;
  // The dq_mean addend (BackwardParams), or null; its divisors are q_vbs (blk when null).
  const float* dq_mean;  // [B, H, NQ, D]
  const void* q_vbs;
  bool q_vbs_is_64;
  int block, num_q_blocks;
};

template <class Elem, int kHeadDim>
void launch_delta(const RowPassParams& p, cudaStream_t stream);
template <class Elem, int kHeadDim>
void launch_dq_finish(const RowPassParams& p, cudaStream_t stream);

#define VSA_ROW_PASSES(Elem, D)                                                 \
  extern template void launch_delta<Elem, D>(const RowPassParams&, cudaStream_t); \
  extern template void launch_dq_finish<Elem, D>(const RowPassParams&, cudaStream_t);
VSA_ROW_PASSES(__nv_bfloat16, 64)
VSA_ROW_PASSES(__nv_bfloat16, 128)
VSA_ROW_PASSES(__half, 64)
VSA_ROW_PASSES(__half, 128)
#undef VSA_ROW_PASSES

}  // namespace vsa::cuda
