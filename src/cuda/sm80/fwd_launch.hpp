// Host-visible declaration of the portable forward launcher; its explicit
// instantiations live in generated translation units (fwd_instance.cu.in).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/common/kernel_params.hpp"

namespace vsa::cuda::sm80 {

// kCtaRows: query rows per CTA, the block size (64 or 128).
template <class Elem, int kHeadDim, int kCtaRows>
void launch_fwd(const FwdKernelParams& p, int batch, cudaStream_t stream);

extern template void launch_fwd<__nv_bfloat16, 64, 64>(const FwdKernelParams&, int, cudaStream_t);
extern template void launch_fwd<__nv_bfloat16, 64, 128>(const FwdKernelParams&, int, cudaStream_t);
extern template void launch_fwd<__nv_bfloat16, 128, 64>(const FwdKernelParams&, int, cudaStream_t);
extern template void launch_fwd<__nv_bfloat16, 128, 128>(const FwdKernelParams&, int, cudaStream_t);
extern template void launch_fwd<__half, 64, 64>(const FwdKernelParams&, int, cudaStream_t);
extern template void launch_fwd<__half, 64, 128>(const FwdKernelParams&, int, cudaStream_t);
extern template void launch_fwd<__half, 128, 64>(const FwdKernelParams&, int, cudaStream_t);
extern template void launch_fwd<__half, 128, 128>(const FwdKernelParams&, int, cudaStream_t);

}  // namespace vsa::cuda::sm80
