// Bad input on the CUDA backend never loses data: every refused call raises
// vsa::Error before any kernel runs, and the caller's device outputs hold
// exactly the bytes they held before (poison, copied back and compared).
// The CPU side of this is tests/cpp/argument_errors_test.cpp. Skipped
// without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "device_buffer.hpp"
#include "scoped_env.hpp"

namespace vsa::test {
namespace {

// bf16 on views with 8 spare elements after every row, so an edit that
// shifts a pointer or a stride keeps the view inside its buffer.
AttentionCase padded_case(DType dtype = DType::bf16) {
  AttentionCase c;
  c.dtype = dtype;
  c.heads = 4;
  c.kv_heads = 2;
  c.num_q_blocks = 3;
  c.num_kv_blocks = 4;
  c.padded_rows = true;
  return c;
}

void expect_refused(const std::function<void()>& call, ErrorKind kind) {
  try {
    call();
    ADD_FAILURE() << "no vsa::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

using ForwardEdit = std::function<void(ForwardParams&)>;

void expect_forward_refused(const char* what, const ForwardEdit& edit,
                            ErrorKind kind = ErrorKind::invalid_argument, DType dtype = DType::bf16) {
  SCOPED_TRACE(what);
  AttentionProblem problem(padded_case(dtype), next_seed());
  DeviceForward call(problem);
  edit(call.params);
  expect_refused([&] { vsa::forward(call.params); }, kind);
  call.copy_back();
  EXPECT_TRUE(problem.out.untouched()) << "out written by a refused call";
  EXPECT_TRUE(problem.lse.untouched()) << "lse written by a refused call";
}

class CudaFailedCall : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(CudaFailedCall, ForwardWithBadShapesDtypesOrDevicesWritesNothing) {
  expect_forward_refused("v shape", [](ForwardParams& p) { p.in.v.shape[1] = 1; });
  expect_forward_refused("out dtype", [](ForwardParams& p) { p.out.dtype = DType::f16; });
  expect_forward_refused("lse shape", [](ForwardParams& p) { p.lse.shape[2] -= 1; });
  expect_forward_refused("null q2k_idx", [](ForwardParams& p) { p.in.q2k_idx.data = nullptr; });
  expect_forward_refused("counts on the host", [](ForwardParams& p) { p.in.q2k_num.device = Device::cpu; });
  expect_forward_refused("layout", [](ForwardParams& p) { p.in.layout = static_cast<Layout>(3); });
  expect_forward_refused("scale", [](ForwardParams& p) { p.in.scale = -1.0f; });
}

TEST_F(CudaFailedCall, ForwardTheKernelsCannotRunWritesNothing) {
  expect_forward_refused("float32 on CUDA", [](ForwardParams&) {}, ErrorKind::unsupported, DType::f32);
  expect_forward_refused("q not 16-byte aligned", [](ForwardParams& p) {
    p.in.q.data = static_cast<char*>(p.in.q.data) + 2;  // one element on; the row gap absorbs it
  }, ErrorKind::unsupported);
  expect_forward_refused("out rows not 16-byte aligned", [](ForwardParams& p) {
    p.out.stride[2] -= 1;  // pitch D + 7 instead of D + 8: smaller, still inside the buffer
  }, ErrorKind::unsupported);
}

TEST_F(CudaFailedCall, ForwardWithAnUnknownKernelOverrideWritesNothing) {
  const ScopedEnv kernel("VSA_CUDA_KERNEL", "sm75");
  expect_forward_refused("VSA_CUDA_KERNEL=sm75", [](ForwardParams&) {});
}

TEST_F(CudaFailedCall, BackwardWithBadTensorsWritesNothing) {
  AttentionProblem problem(padded_case(), next_seed());
  DeviceBackward call(problem, problem.backward_params());  // dq, dk, dv poisoned
  BackwardParams& p = call.params;
  p.dk.shape[1] = 1;  // k has 2 heads
  expect_refused([&] { vsa::backward(p); }, ErrorKind::invalid_argument);
  p.dk.shape[1] = 2;
  p.lse.dtype = DType::bf16;
  expect_refused([&] { vsa::backward(p); }, ErrorKind::invalid_argument);
  call.copy_back();
  EXPECT_TRUE(problem.dq.untouched()) << "dq written by a refused call";
  EXPECT_TRUE(problem.dk.untouched()) << "dk written by a refused call";
  EXPECT_TRUE(problem.dv.untouched()) << "dv written by a refused call";
}

TEST_F(CudaFailedCall, MetadataWithBadOutputsWritesNothing) {
  HostTensor map(DType::boolean, {1, 2, 3, 4});
  HostTensor idx(DType::i32, {1, 2, 3, 3}), num(DType::i32, {1, 2, 3});  // idx should be [.., 4]
  idx.poison();
  num.poison();
  const DeviceMirror map_d(map), idx_d(idx), num_d(num);
  expect_refused([&] { vsa::map_to_index(map_d.ref(), idx_d.ref(), num_d.ref()); }, ErrorKind::invalid_argument);
  idx_d.copy_back();
  num_d.copy_back();
  EXPECT_TRUE(idx.untouched());
  EXPECT_TRUE(num.untouched());

  HostTensor q2k_idx(DType::i32, {1, 2, 3, 2}), q2k_num(DType::i32, {1, 2, 3});
  HostTensor k2q_idx(DType::i32, {1, 2, 4, 3}), k2q_num(DType::i64, {1, 2, 4});  // CUDA counts in int32
  k2q_idx.poison();
  k2q_num.poison();
  const DeviceMirror q2k_idx_d(q2k_idx), q2k_num_d(q2k_num), k2q_idx_d(k2q_idx), k2q_num_d(k2q_num);
  expect_refused([&] { vsa::invert_indices(q2k_idx_d.ref(), q2k_num_d.ref(), 4, k2q_idx_d.ref(), k2q_num_d.ref()); },
                 ErrorKind::unsupported);
  k2q_idx_d.copy_back();
  k2q_num_d.copy_back();
  EXPECT_TRUE(k2q_idx.untouched());
  EXPECT_TRUE(k2q_num.untouched());
}

}  // namespace
}  // namespace vsa::test
