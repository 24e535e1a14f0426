// The CUDA forward pass on the shared case matrix of the CPU tests: the same
// random problems, poisoned outputs and float64 reference, run on the GPU.
// Skipped when the machine has no CUDA device (CI); the GPU script runs it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "attention_cases.hpp"
#include "device_buffer.hpp"

namespace vsa::test {
namespace {

bool have_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// The CUDA backend takes 16-bit inputs; float32 cases run as bfloat16.
AttentionCase on_gpu(AttentionCase c) {
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

// Runs one case on device 0 with `caller_device` current during the call:
// the library must launch on the tensors' device and leave the caller's
// current device as it found it.
void expect_gpu_forward_matches(const AttentionCase& c, bool need_lse, int caller_device) {
  AttentionProblem problem(on_gpu(c), next_seed());
  ForwardParams p = problem.forward_params(need_lse);  // poisons out and lse first
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const DeviceInputs device(problem);
  const DeviceMirror out(problem.out), lse(problem.lse);
  p.in = device.inputs();
  p.out = out.ref();
  p.lse = need_lse ? lse.ref() : TensorRef{};
  ASSERT_TRUE(supported(p.in).ok) << supported(p.in).reason;
  ASSERT_EQ(cudaSetDevice(caller_device), cudaSuccess);
  forward(p);
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, caller_device) << "forward changed the caller's current device";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  out.copy_back();
  lse.copy_back();
  problem.expect_forward_matches(need_lse);
}

class CudaForward : public ::testing::TestWithParam<AttentionCase> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
  void run(bool need_lse) { expect_gpu_forward_matches(GetParam(), need_lse, 0); }
};

TEST_P(CudaForward, MatchesReference) { run(true); }
TEST_P(CudaForward, WithoutLseLeavesLseUntouched) { run(false); }

INSTANTIATE_TEST_SUITE_P(Cases, CudaForward, ::testing::ValuesIn(attention_cases()), case_name);

TEST(CudaDevice, CallersCurrentDeviceIsKept) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) GTEST_SKIP() << "needs two CUDA devices";
  expect_gpu_forward_matches(attention_cases().front(), true, 1);
}

TEST(CudaSupport, Float32IsRefusedWithAReason) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  AttentionCase c;
  AttentionProblem problem(c, next_seed());
  const DeviceInputs device(problem);
  const Support s = supported(device.inputs());
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("float32"), std::string::npos) << s.reason;
}

}  // namespace
}  // namespace vsa::test
