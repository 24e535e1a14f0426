// Makes a device current for one call and gives the caller's current device
// back on every exit path: a library call must not change the calling
// thread's CUDA state (PyTorch and engines keep their own current device).
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/common/cuda_check.hpp"

namespace vsa::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (device != previous_) check_cuda(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() {
    // Restoring a device that was current a moment ago cannot fail in a way
    // the caller could act on, and a destructor must not throw.
    cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace vsa::cuda
