// Mirrors a host test tensor on the GPU: same strides, same bytes (poison
// included), and copies results back so the host-side checks apply unchanged.
// Also: the GPU check every GPU test starts with, and a problem's inputs on
// the GPU.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>

#include "support/attention_problem.hpp"
#include "support/host_tensor.hpp"

namespace vsa::test {

class DeviceMirror {
 public:
  // On the current device.
  explicit DeviceMirror(const HostTensor& host) : host_(host.ref()) {
    EXPECT_EQ(cudaGetDevice(&device_index_), cudaSuccess);
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
    r.device_index = device_index_;
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
  int device_index_ = 0;
  void* device_ = nullptr;
  std::size_t bytes_ = 0;
};

inline bool have_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// The CUDA backend takes 16-bit inputs; float32 cases run as bfloat16.
inline AttentionCase on_gpu(AttentionCase c) {
  if (c.dtype == DType::f32) c.dtype = DType::bf16;
  return c;
}

// Device memory of a given size (none for 0), freed with the object.
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

// The problem's six inputs (seven with q_variable_block_sizes) mirrored on
// the GPU, as AttentionInputs.
class DeviceInputs {
 public:
  explicit DeviceInputs(const AttentionProblem& problem)
      : problem_(problem), q_(problem.q), k_(problem.k), v_(problem.v), idx_(problem.q2k_idx),
        num_(problem.q2k_num), vbs_(problem.vbs),
        q_vbs_(problem.spec().q_padding ? std::make_unique<DeviceMirror>(problem.q_vbs) : nullptr) {}

  AttentionInputs inputs() const {
    AttentionInputs in = problem_.inputs();
    in.q = q_.ref();
    in.k = k_.ref();
    in.v = v_.ref();
    in.q2k_idx = idx_.ref();
    in.q2k_num = num_.ref();
    in.variable_block_sizes = vbs_.ref();
    if (q_vbs_) in.q_variable_block_sizes = q_vbs_->ref();
    return in;
  }

 private:
  const AttentionProblem& problem_;
  DeviceMirror q_, k_, v_, idx_, num_, vbs_;
  std::unique_ptr<DeviceMirror> q_vbs_;  // null without q_variable_block_sizes
};

// A forward call of `problem` on the GPU: the params point at device copies
// of the inputs and of out and lse, poisoned as forward_params() left them.
struct DeviceForward {
  explicit DeviceForward(AttentionProblem& problem, bool need_lse = true)
      : params(problem.forward_params(need_lse)), inputs(problem), out(problem.out), lse(problem.lse) {
    params.in = inputs.inputs();
    params.out = out.ref();
    params.lse = need_lse ? lse.ref() : TensorRef{};
  }
  void copy_back() const {
    out.copy_back();
    lse.copy_back();
  }
  ForwardParams params;
  DeviceInputs inputs;
  DeviceMirror out, lse;
};

// A backward call on the GPU: `host` (from problem.backward_params(), so dq,
// dk, dv poisoned) with every tensor replaced by a device copy; run() gives it
// the workspace the library asks for (or `workspace_bytes` of it), every byte
// 0xFF (NaN in each float type, -1 in each integer one) so that a pass reading
// scratch no pass wrote shows up, and copies the gradients back.
struct DeviceBackward {
  DeviceBackward(AttentionProblem& problem, const BackwardParams& host)
      : params(host), inputs(problem), out(problem.out), lse(problem.lse), dout(problem.dout), dq(problem.dq),
        dk(problem.dk), dv(problem.dv) {
    params.in = inputs.inputs();
    params.out = out.ref();
    params.lse = lse.ref();
    params.dout = dout.ref();
    params.dq = dq.ref();
    params.dk = dk.ref();
    params.dv = dv.ref();
  }
  // The gradients, back into the problem's dq, dk, dv.
  void copy_back() const {
    dq.copy_back();
    dk.copy_back();
    dv.copy_back();
  }
  void run(std::size_t workspace_bytes) {
    const DeviceBytes workspace(workspace_bytes);
    params.workspace = workspace.data();
    params.workspace_bytes = workspace.size();
    if (workspace.size() > 0) {
      EXPECT_EQ(cudaMemset(workspace.data(), 0xFF, workspace.size()), cudaSuccess);
    }
    vsa::backward(params);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    copy_back();
  }
  void run() { run(backward_workspace_bytes(params)); }
  BackwardParams params;
  DeviceInputs inputs;
  DeviceMirror out, lse, dout, dq, dk, dv;
};

}  // namespace vsa::test
