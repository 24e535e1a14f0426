// The backward's launchers as every kernel family declares them: each family
// (sm80/bwd_launch.hpp, sm90/bwd_launch.hpp) expands this inside its own
// namespace, and its explicit instantiations live in generated translation
// units (<family>/bwd_instance.cu.in).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/common/kernel_params.hpp"

// launch_bwd: the key pass; grid: num_kv_tiles (NK · blk/64) × units (batch · kv heads, or a group of them).
// launch_bwd_dq: the dQ pass; grid: 64-row query tiles × heads × batch.
#define VSA_BWD_LAUNCHER_INSTANCES(Elem, D)                                                      \
  extern template void launch_bwd<Elem, D>(const BwdKernelParams&, int, int, cudaStream_t); \
  extern template void launch_bwd_dq<Elem, D>(const BwdKernelParams&, int, cudaStream_t);
#define VSA_DECLARE_BWD_LAUNCHERS                                                              \
  template <class Elem, int kHeadDim>                                                          \
  void launch_bwd(const BwdKernelParams& p, int num_kv_tiles, int units, cudaStream_t stream); \
  template <class Elem, int kHeadDim>                                                          \
  void launch_bwd_dq(const BwdKernelParams& p, int batch, cudaStream_t stream);                \
  VSA_BWD_LAUNCHER_INSTANCES(__nv_bfloat16, 64)                                                \
  VSA_BWD_LAUNCHER_INSTANCES(__nv_bfloat16, 128)                                               \
  VSA_BWD_LAUNCHER_INSTANCES(__half, 64)                                                       \
  VSA_BWD_LAUNCHER_INSTANCES(__half, 128)
