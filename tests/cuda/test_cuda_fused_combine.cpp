// The gate combine fused into the CUDA forward's epilogue: bitwise the CUDA
// forward followed by the CUDA gate_combine (out and lse), on the shared case
// matrix with and without a gate. The suite's name matches the *CudaForward*
// filters, so VSA_CUDA_KERNEL=sm80 and sm90v1 runs (ctest's
// cuda_portable_kernels, scripts/gpu.sh) cover the portable and the first
// Hopper kernel too; the default run covers the TMA kernel. Skipped without
// a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <utility>

#include "attention_cases.hpp"
#include "device_buffer.hpp"
#include "support/fused_combine.hpp"
#include "vsa/layer.hpp"

namespace vsa::test {
namespace {

void run_on_gpu(AttentionProblem& problem, const CombineAddend& addend, CombinePath path) {
  DeviceForward call(problem);  // poisons out and lse, then mirrors them
  const DeviceMirror coarse(addend.coarse), gate(addend.gate), fine(addend.fine);
  const TensorRef gate_ref = addend.gated ? gate.ref() : TensorRef{};
  if (path == CombinePath::fused) {
    call.params.coarse = coarse.ref();
    call.params.gate = gate_ref;
    call.params.fine = addend.keep_fine ? fine.ref() : TensorRef{};
  }
  forward(call.params);
  if (path == CombinePath::forward_then_combine)
    gate_combine({call.out.ref(), coarse.ref(), gate_ref, call.out.ref(), problem.spec().layout, nullptr});
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  call.copy_back();
  if (path == CombinePath::fused) fine.copy_back();
}

class CudaForwardGateCombine : public ::testing::TestWithParam<std::tuple<AttentionCase, AddendKind>> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaForwardGateCombine, IsBitwiseForwardThenGateCombine) {
  const auto& [spec, kind] = GetParam();
  const std::uint64_t seed = next_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  AttentionProblem problem(on_gpu(spec), seed);
  std::mt19937_64 rng(seed + 1);
  CombineAddend addend = draw_combine_addend(problem, rng, kind);
  expect_fused_combine_matches(problem, addend, [&](CombinePath path) { run_on_gpu(problem, addend, path); });
}

// Lists that take the CTAs of one layer through different schedules (empty,
// only an empty block, one partial block, a long list with repeats), D 64
// and 128, blocks of 64 and 128: the Hopper kernels' 64-row CTAs cover half
// a 128-row block each and must both pick that block's coarse row. Without a
// gate the fused forward also keeps the attention (the training path's call
// for an ungated layer).
class CudaForwardGateCombineLists : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaForwardGateCombineLists, UnevenListsAndPartialBlocks) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  for (const std::int64_t head_dim : {64, 128})
    for (const std::int64_t block : {64, 128}) {
      SCOPED_TRACE("D " + std::to_string(head_dim) + " blk " + std::to_string(block));
      AttentionCase c;
      c.dtype = DType::f16;
      c.head_dim = head_dim;
      c.block = block;
      c.layout = Layout::bshd;
      c.heads = 4;
      c.kv_heads = 2;
      c.num_q_blocks = 4;
      c.num_kv_blocks = 5;
      c.max_kv = 12;
      const std::uint64_t seed = next_seed();
      AttentionProblem problem(c, seed);
      problem.set_vbs(4, block - 9);
      problem.set_vbs(1, 0);
      for (std::int64_t h = 0; h < c.heads; ++h) {
        problem.set_list(0, h, 0, {});
        problem.set_list(0, h, 1, {4});
        problem.set_list(0, h, 2, {1});  // only an empty block: zero rows, then coarse
        problem.set_list(0, h, 3, {0, 2, 3, 4, 2, 0, 3, 4, 2, 0, 3, 4});
      }
      std::mt19937_64 rng(seed + 1);
      const bool gated = GetParam();
      CombineAddend addend = draw_combine_addend(problem, rng, gated, !gated);
      expect_fused_combine_matches(problem, addend, [&](CombinePath path) { run_on_gpu(problem, addend, path); });
    }
}

INSTANTIATE_TEST_SUITE_P(GatedOrNot, CudaForwardGateCombineLists, ::testing::Bool());

// Addends the CUDA kernels cannot take, or that break the contract: refused
// before any kernel runs, out and lse left as they were (poison).
TEST(CudaForwardGateCombineRefused, BadAddendsWriteNothing) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  AttentionCase c;
  c.dtype = DType::bf16;
  c.padded_rows = true;  // 8 spare elements after each row: a shifted stride stays in the buffer
  const std::pair<const char*, ErrorKind> cases[] = {
      {"gate rows not 16-byte aligned", ErrorKind::unsupported},
      {"coarse not 16-byte aligned", ErrorKind::unsupported},
      {"coarse on the host", ErrorKind::invalid_argument},
      {"gate without coarse", ErrorKind::invalid_argument},
      {"fine rows not 16-byte aligned", ErrorKind::unsupported},
  };
  for (int n = 0; n < 5; ++n) {
    SCOPED_TRACE(cases[n].first);
    AttentionProblem problem(c, next_seed());
    std::mt19937_64 rng(next_seed());
    CombineAddend addend = draw_combine_addend(problem, rng, true, true);
    DeviceForward call(problem);
    addend.fine.poison();
    const DeviceMirror coarse(addend.coarse), gate(addend.gate), fine(addend.fine);
    call.params.coarse = coarse.ref();
    call.params.gate = gate.ref();
    call.params.fine = fine.ref();
    if (n == 0) call.params.gate.stride[2] -= 1;
    if (n == 1) call.params.coarse.data = static_cast<char*>(call.params.coarse.data) + 4;
    if (n == 2) call.params.coarse = addend.coarse.ref();
    if (n == 3) call.params.coarse = TensorRef{};
    if (n == 4) call.params.fine.stride[2] -= 1;
    try {
      forward(call.params);
      ADD_FAILURE() << "no vsa::Error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), cases[n].second) << e.what();
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    call.copy_back();
    fine.copy_back();
    EXPECT_TRUE(problem.out.untouched()) << "out written by a refused call";
    EXPECT_TRUE(problem.lse.untouched()) << "lse written by a refused call";
    EXPECT_TRUE(addend.fine.untouched()) << "fine written by a refused call";
  }
}

std::string fused_case_name(const ::testing::TestParamInfo<std::tuple<AttentionCase, AddendKind>>& info) {
  return std::get<0>(info.param).name + "_" + addend_kind_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaForwardGateCombine,
                         ::testing::Combine(::testing::ValuesIn(attention_cases()),
                                            ::testing::Values(AddendKind::no_gate, AddendKind::gated,
                                                              AddendKind::gated_keeping_fine)),
                         fused_case_name);

}  // namespace
}  // namespace vsa::test
