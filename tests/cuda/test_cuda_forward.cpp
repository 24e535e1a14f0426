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

class CudaForward : public ::testing::TestWithParam<AttentionCase> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }

  void run(bool need_lse) {
    AttentionProblem problem(on_gpu(GetParam()), next_seed());
    ForwardParams host = problem.forward_params(need_lse);
    DeviceMirror q(problem.q), k(problem.k), v(problem.v), idx(problem.q2k_idx),
        num(problem.q2k_num), vbs(problem.vbs), out(problem.out), lse(problem.lse);
    ForwardParams p = host;
    p.in.q = q.ref();
    p.in.k = k.ref();
    p.in.v = v.ref();
    p.in.q2k_idx = idx.ref();
    p.in.q2k_num = num.ref();
    p.in.variable_block_sizes = vbs.ref();
    p.out = out.ref();
    p.lse = need_lse ? lse.ref() : TensorRef{};
    ASSERT_TRUE(supported(p.in).ok) << supported(p.in).reason;
    forward(p);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    out.copy_back();
    lse.copy_back();
    problem.expect_forward_matches(need_lse);
  }
};

TEST_P(CudaForward, MatchesReference) { run(true); }
TEST_P(CudaForward, WithoutLseLeavesLseUntouched) { run(false); }

INSTANTIATE_TEST_SUITE_P(Cases, CudaForward, ::testing::ValuesIn(attention_cases()), case_name);

TEST(CudaSupport, Float32IsRefusedWithAReason) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  AttentionCase c;
  AttentionProblem problem(c, next_seed());
  DeviceMirror q(problem.q), k(problem.k), v(problem.v), idx(problem.q2k_idx),
      num(problem.q2k_num), vbs(problem.vbs);
  AttentionInputs in = problem.inputs();
  in.q = q.ref();
  in.k = k.ref();
  in.v = v.ref();
  in.q2k_idx = idx.ref();
  in.q2k_num = num.ref();
  in.variable_block_sizes = vbs.ref();
  const Support s = supported(in);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("float32"), std::string::npos) << s.reason;
}

}  // namespace
}  // namespace vsa::test
