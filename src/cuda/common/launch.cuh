// Launching a kernel that takes its params by value and more than 48 KB of
// dynamic shared memory: the opt-in attribute is set once per kernel (a
// static local of this kernel's instantiation), then the launch is checked.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/cuda_check.hpp"

namespace vsa::cuda {

template <auto kKernel, int kSmemBytes, class Params>
void launch_kernel(dim3 grid, int threads, cudaStream_t stream, const Params& p, const char* name) {
  static const cudaError_t attribute_status =
      cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  check_cuda(attribute_status, name);
  kKernel<<<grid, threads, kSmemBytes, stream>>>(p);
  check_launch(name);
}

}  // namespace vsa::cuda
