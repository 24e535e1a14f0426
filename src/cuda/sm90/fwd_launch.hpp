// Host-visible declaration of the Hopper forward launcher; its explicit
// instantiations live in generated translation units (fwd_instance.cu.in).
// The kernel body exists only in sm_90a code.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/common/kernel_params.hpp"

namespace vsa::cuda::sm90 {

template <class Elem, int kHeadDim>
void launch_fwd(const FwdKernelParams& p, int batch, cudaStream_t stream);

extern template void launch_fwd<__nv_bfloat16, 64>(const FwdKernelParams&, int, cudaStream_t);
extern template void launch_fwd<__nv_bfloat16, 128>(const FwdKernelParams&, int, cudaStream_t);
extern template void launch_fwd<__half, 64>(const FwdKernelParams&, int, cudaStream_t);
extern template void launch_fwd<__half, 128>(const FwdKernelParams&, int, cudaStream_t);

}  // namespace vsa::cuda::sm90
