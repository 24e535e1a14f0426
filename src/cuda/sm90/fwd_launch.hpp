// Host-visible declarations of the Hopper forward launchers: the third
// version (warp-specialized and persistent, fwd_ws_kernel.cuh; the override
// VSA_CUDA_KERNEL=sm90ws), the second (TMA loads, fwd_tma_kernel.cuh), the
// kernel that takes its place for 128-token blocks at D = 128
// (fwd_pair_kernel.cuh), and the first (cp.async loads, fwd_kernel.cuh),
// which runs what TMA cannot describe and the override
// VSA_CUDA_KERNEL=sm90v1. Their explicit instantiations live in generated
// translation units (fwd_*instance.cu.in). The kernel bodies exist only in
// sm_90a code.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/common/kernel_params.hpp"
#include "cuda/sm90/tensor_maps.hpp"

namespace vsa::cuda::sm90 {

template <class Elem, int kHeadDim>
void launch_fwd(const FwdKernelParams& p, int batch, cudaStream_t stream);

extern template void launch_fwd<__nv_bfloat16, 64>(const FwdKernelParams&, int, cudaStream_t);
extern template void launch_fwd<__nv_bfloat16, 128>(const FwdKernelParams&, int, cudaStream_t);
extern template void launch_fwd<__half, 64>(const FwdKernelParams&, int, cudaStream_t);
extern template void launch_fwd<__half, 128>(const FwdKernelParams&, int, cudaStream_t);

// v2's CTAs per SM (128 registers a thread, 49 KB of shared memory at D = 128), which the host
// also needs: the list walks' phase (kernel_choice.hpp) counts v2's launch in resident waves.
constexpr int kTmaFwdCtasPerSm = 4;

template <class Elem, int kHeadDim>
void launch_fwd_tma(const FwdKernelParams& p, const FwdTensorMaps& maps, int batch, cudaStream_t stream);

extern template void launch_fwd_tma<__nv_bfloat16, 64>(const FwdKernelParams&, const FwdTensorMaps&, int, cudaStream_t);
extern template void launch_fwd_tma<__nv_bfloat16, 128>(const FwdKernelParams&, const FwdTensorMaps&, int, cudaStream_t);
extern template void launch_fwd_tma<__half, 64>(const FwdKernelParams&, const FwdTensorMaps&, int, cudaStream_t);
extern template void launch_fwd_tma<__half, 128>(const FwdKernelParams&, const FwdTensorMaps&, int, cudaStream_t);

// 128-token blocks at D = 128: a CTA per query block, two consumer warpgroups
// sharing K/V (fwd_pair_kernel.cuh).
template <class Elem, int kHeadDim>
void launch_fwd_pair(const FwdKernelParams& p, const FwdTensorMaps& maps, int batch, cudaStream_t stream);

extern template void launch_fwd_pair<__nv_bfloat16, 128>(const FwdKernelParams&, const FwdTensorMaps&, int,
                                                         cudaStream_t);
extern template void launch_fwd_pair<__half, 128>(const FwdKernelParams&, const FwdTensorMaps&, int, cudaStream_t);

// num_sms: the device's SM count (the persistent grid's size).
template <class Elem, int kHeadDim>
void launch_fwd_ws(const FwdKernelParams& p, const FwdTensorMaps& maps, int batch, int num_sms, cudaStream_t stream);

extern template void launch_fwd_ws<__nv_bfloat16, 64>(const FwdKernelParams&, const FwdTensorMaps&, int, int,
                                                      cudaStream_t);
extern template void launch_fwd_ws<__nv_bfloat16, 128>(const FwdKernelParams&, const FwdTensorMaps&, int, int,
                                                       cudaStream_t);
extern template void launch_fwd_ws<__half, 64>(const FwdKernelParams&, const FwdTensorMaps&, int, int, cudaStream_t);
extern template void launch_fwd_ws<__half, 128>(const FwdKernelParams&, const FwdTensorMaps&, int, int, cudaStream_t);

}  // namespace vsa::cuda::sm90
