// Host-visible declarations of the Hopper backward launchers; their explicit
// instantiations live in generated translation units (bwd_instance.cu.in).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/common/kernel_params.hpp"

namespace vsa::cuda::sm90 {

// The key pass; grid: num_kv_tiles (NK · blk/64) × kv heads × batch.
template <class Elem, int kHeadDim>
void launch_bwd(const BwdKernelParams& p, int num_kv_tiles, int batch, cudaStream_t stream);
// The dQ pass; grid: 64-row query tiles × heads × batch.
template <class Elem, int kHeadDim>
void launch_bwd_dq(const BwdKernelParams& p, int batch, cudaStream_t stream);

extern template void launch_bwd<__nv_bfloat16, 64>(const BwdKernelParams&, int, int, cudaStream_t);
extern template void launch_bwd_dq<__nv_bfloat16, 64>(const BwdKernelParams&, int, cudaStream_t);
extern template void launch_bwd<__nv_bfloat16, 128>(const BwdKernelParams&, int, int, cudaStream_t);
extern template void launch_bwd_dq<__nv_bfloat16, 128>(const BwdKernelParams&, int, cudaStream_t);
extern template void launch_bwd<__half, 64>(const BwdKernelParams&, int, int, cudaStream_t);
extern template void launch_bwd_dq<__half, 64>(const BwdKernelParams&, int, cudaStream_t);
extern template void launch_bwd<__half, 128>(const BwdKernelParams&, int, int, cudaStream_t);
extern template void launch_bwd_dq<__half, 128>(const BwdKernelParams&, int, cudaStream_t);

}  // namespace vsa::cuda::sm90
