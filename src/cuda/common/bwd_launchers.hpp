// The backward's launchers as the kernel families declare them: each family
// (sm80/bwd_launch.hpp, sm90/bwd_launch.hpp) expands VSA_DECLARE_BWD_LAUNCHER
// for each of its launchers (after the params, the types of the launch
// arguments) inside its own namespace, and its explicit instantiations live
// in generated translation units (<family>/bwd_instance.cu.in).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/common/kernel_params.hpp"

// launch_bwd: the key pass; grid: num_kv_tiles (NK · blk/64) × units (batch · kv heads, or a
// group of them). launch_bwd_dq_stored: the dQ pass over the stored dSᵀ tiles; grid: 64-row
// query tiles × the group's query heads.
#define VSA_BWD_LAUNCHER_INSTANCES(Launcher, Elem, D, ...) \
  extern template void Launcher<Elem, D>(const BwdKernelParams&, __VA_ARGS__, cudaStream_t);
#define VSA_DECLARE_BWD_LAUNCHER(Launcher, ...)                                 \
  template <class Elem, int kHeadDim>                                           \
  void Launcher(const BwdKernelParams& p, __VA_ARGS__, cudaStream_t stream);   \
  VSA_BWD_LAUNCHER_INSTANCES(Launcher, __nv_bfloat16, 64, __VA_ARGS__)          \
  VSA_BWD_LAUNCHER_INSTANCES(Launcher, __nv_bfloat16, 128, __VA_ARGS__)         \
  VSA_BWD_LAUNCHER_INSTANCES(Launcher, __half, 64, __VA_ARGS__)                 \
  VSA_BWD_LAUNCHER_INSTANCES(Launcher, __half, 128, __VA_ARGS__)
