// A host AttentionProblem mirrored on the GPU, for the forward and backward
// GPU suites: same strides, same bytes (poison included), and results copied
// back so the host-side checks against the float64 reference apply unchanged.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "attention_cases.hpp"
#include "device_buffer.hpp"

namespace vsa::test {

inline bool have_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// The CUDA backend takes 16-bit inputs; float32 cases run as bfloat16.
inline AttentionCase on_gpu(AttentionCase c) {
  if (c.dtype == DType::f32) c.dtype = DType::bf16;
  return c;
}

// The problem's six inputs mirrored on the GPU, as AttentionInputs.
class DeviceInputs {
 public:
  explicit DeviceInputs(const AttentionProblem& problem)
      : problem_(problem), q_(problem.q), k_(problem.k), v_(problem.v), idx_(problem.q2k_idx),
        num_(problem.q2k_num), vbs_(problem.vbs) {}

  AttentionInputs inputs() const {
    AttentionInputs in = problem_.inputs();
    in.q = q_.ref();
    in.k = k_.ref();
    in.v = v_.ref();
    in.q2k_idx = idx_.ref();
    in.q2k_num = num_.ref();
    in.variable_block_sizes = vbs_.ref();
    return in;
  }

 private:
  const AttentionProblem& problem_;
  DeviceMirror q_, k_, v_, idx_, num_, vbs_;
};

// Device memory of a given size, freed with the object.
class DeviceBytes {
 public:
  explicit DeviceBytes(std::size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) {
      EXPECT_EQ(cudaMalloc(&data_, bytes_), cudaSuccess);
    }
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  ~DeviceBytes() { cudaFree(data_); }
  void* data() const { return data_; }
  std::size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

}  // namespace vsa::test
