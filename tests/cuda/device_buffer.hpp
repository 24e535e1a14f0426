// Mirrors a host test tensor on the GPU: same strides, same bytes (poison
// included), and copies results back so the host-side checks apply unchanged.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>

#include "support/host_tensor.hpp"

namespace vsa::test {

class DeviceMirror {
 public:
  explicit DeviceMirror(const HostTensor& host) : host_(host.ref()) {
    bytes_ = span_elements(host_) * dtype_size(host_.dtype);
    EXPECT_EQ(cudaMalloc(&device_, bytes_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(device_, host_.data, bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  DeviceMirror(const DeviceMirror&) = delete;
  DeviceMirror& operator=(const DeviceMirror&) = delete;
  ~DeviceMirror() { cudaFree(device_); }

  TensorRef ref() const {
    TensorRef r = host_;
    r.data = device_;
    r.device = Device::cuda;
    r.device_index = 0;
    return r;
  }
  void copy_back() const {
    EXPECT_EQ(cudaMemcpy(host_.data, device_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
  }

 private:
  // Elements from the first to the last one the view addresses.
  static std::size_t span_elements(const TensorRef& t) {
    std::int64_t last = 0;
    for (int i = 0; i < t.rank; ++i) last += (t.shape[i] - 1) * t.stride[i];
    return static_cast<std::size_t>(last + 1);
  }

  TensorRef host_;
  void* device_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace vsa::test
