// CUDA runtime errors become vsa::Error (kind runtime) with the call site.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "vsa/error.hpp"

namespace vsa::cuda {

inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw Error(ErrorKind::runtime, std::string(what) + " failed: " + cudaGetErrorString(status));
}

// After a launch: configuration errors surface here without a device sync.
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

}  // namespace vsa::cuda
