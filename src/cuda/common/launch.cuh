// Launching a kernel that takes its params by value and more than 48 KB of
// dynamic shared memory: its allowance raised on the current device
// (smem_opt_in.hpp), then the launch is checked.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/smem_opt_in.hpp"

namespace vsa::cuda {

template <auto kKernel, int kSmemBytes, class Params>
void launch_kernel(dim3 grid, int threads, cudaStream_t stream, const Params& p, const char* name) {
  allow_dynamic_smem<kKernel>(kSmemBytes, name);
  kKernel<<<grid, threads, kSmemBytes, stream>>>(p);
  check_launch(name);
}

}  // namespace vsa::cuda
