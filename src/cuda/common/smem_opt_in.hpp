// A kernel's allowance of dynamic shared memory past the default 48 KB
// (cudaFuncAttributeMaxDynamicSharedMemorySize) is an attribute of the kernel
// on each device: cudaFuncSetAttribute sets it on the current device only,
// for every caller there. So it is raised on each device the kernel runs on,
// and never lowered: two host threads launching it with different sizes on one
// device would otherwise set each other's allowance below their launch.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <mutex>
#include <string>

#include "cuda/common/cuda_check.hpp"
#include "vsa/error.hpp"

namespace vsa::cuda {

// Lets kKernel launch on the current device with `bytes` of dynamic shared memory.
template <auto kKernel>
void allow_dynamic_smem(int bytes, const char* name) {
  constexpr int kDefaultBytes = 48 * 1024;
  if (bytes <= kDefaultBytes) return;
  static std::array<std::atomic<int>, 64> allowed{};  // per device: the allowance set there
  static std::mutex raising;
  int device = 0;
  check_cuda(cudaGetDevice(&device), name);
  if (device < 0 || device >= static_cast<int>(allowed.size()))
    throw Error(ErrorKind::unsupported, "device", "a CUDA device index in [0, 64)", std::to_string(device));
  std::atomic<int>& slot = allowed[static_cast<std::size_t>(device)];
  if (slot.load(std::memory_order_acquire) >= bytes) return;
  const std::lock_guard<std::mutex> lock(raising);
  if (slot.load(std::memory_order_relaxed) >= bytes) return;
  check_cuda(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), name);
  slot.store(bytes, std::memory_order_release);
}

}  // namespace vsa::cuda
