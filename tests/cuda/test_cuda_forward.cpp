// The CUDA forward pass on the shared case matrix of the CPU tests: the same
// random problems, poisoned outputs and float64 reference, run on the GPU.
// Skipped when the machine has no CUDA device (CI); the GPU script runs it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "attention_cases.hpp"
#include "device_buffer.hpp"

namespace vsa::test {
namespace {

// Runs a problem on device 0 with `caller_device` current during the call:
// the library must launch on the tensors' device and leave the caller's
// current device as it found it.
void expect_gpu_forward_matches(AttentionProblem& problem, bool need_lse, int caller_device) {
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
  void run(bool need_lse) {
    AttentionProblem problem(on_gpu(GetParam()), next_seed());
    expect_gpu_forward_matches(problem, need_lse, 0);
  }
};

TEST_P(CudaForward, MatchesReference) { run(true); }
TEST_P(CudaForward, WithoutLseLeavesLseUntouched) { run(false); }

INSTANTIATE_TEST_SUITE_P(Cases, CudaForward, ::testing::ValuesIn(attention_cases()), case_name);

// Blocks cut on both sides of every boundary the kernel steps over: its
// 32-key scoring steps (D = 64), the 16- and 32-key widths of the Hopper
// forward's partial tiles, its 64-key tiles (blk = 128), the block end.
class CudaPartialBlocks : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CudaPartialBlocks, EveryCutMatchesReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const auto [head_dim, block] = GetParam();
  const std::vector<std::int64_t> cuts =
      block == 64 ? std::vector<std::int64_t>{1, 15, 16, 17, 31, 32, 33, 63, 64}
                  : std::vector<std::int64_t>{1, 16, 17, 31, 32, 33, 63, 64, 65, 80, 81, 95, 96, 97, 127, 128};
  const AttentionCase c = partial_blocks_case(head_dim, block, cuts);
  AttentionProblem problem(c, next_seed());
  list_every_block(problem, c, cuts);
  expect_gpu_forward_matches(problem, true, 0);
}

INSTANTIATE_TEST_SUITE_P(DimsAndBlocks, CudaPartialBlocks,
                         ::testing::Combine(::testing::Values(64, 128), ::testing::Values(64, 128)));

// A single cut per block, alone in the list: the first scored step of the
// row is the partial one (the running max starts there).
TEST(CudaPartialBlocks, ListOfOnePartialBlock) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  AttentionCase c;
  c.dtype = DType::bf16;
  c.num_q_blocks = 4;
  c.num_kv_blocks = 4;
  AttentionProblem problem(c, next_seed());
  const std::int64_t cuts[] = {1, 32, 33, 63};
  for (std::int64_t j = 0; j < 4; ++j) problem.set_vbs(j, cuts[j]);
  for (std::int64_t h = 0; h < c.heads; ++h)
    for (std::int64_t i = 0; i < 4; ++i) problem.set_list(0, h, i, {i});
  expect_gpu_forward_matches(problem, true, 0);
}

// Lists aimed at the Hopper forward's TMA loads and its per-CTA schedule, in
// one launch: lengths from 0 to 40 side by side, the last KV block (its
// tile ends on the tensor's last row; partial too), one block repeated 40
// times, every block in order, and a block with no token (vbs 0) listed
// first and among others. Both layouts, both block sizes, D 64/128.
class CudaForwardLists : public ::testing::TestWithParam<std::tuple<int, int, Layout>> {};

TEST_P(CudaForwardLists, UnevenRepeatedAndLastRowBlocks) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const auto [head_dim, block, layout] = GetParam();
  AttentionCase c;
  c.dtype = DType::bf16;
  c.head_dim = head_dim;
  c.block = block;
  c.layout = layout;
  c.heads = 2;
  c.kv_heads = 1;
  c.num_q_blocks = 7;
  c.num_kv_blocks = 5;
  c.max_kv = 40;
  AttentionProblem problem(on_gpu(c), next_seed());
  const std::int64_t last = c.num_kv_blocks - 1, empty = 3;
  for (std::int64_t j = 0; j < c.num_kv_blocks; ++j) problem.set_vbs(j, c.block);
  problem.set_vbs(last, c.block - 7);
  problem.set_vbs(empty, 0);
  for (std::int64_t h = 0; h < c.heads; ++h) {
    problem.set_list(0, h, 0, {});
    problem.set_list(0, h, 1, {last});
    problem.set_list(0, h, 2, std::vector<std::int64_t>(40, 2));
    problem.set_list(0, h, 3, {0, 1, 2, 3, last});
    std::vector<std::int64_t> long_list;
    for (int e = 0; e < 40; ++e) long_list.push_back((e * 3 + h) % c.num_kv_blocks);
    problem.set_list(0, h, 4, long_list);
    problem.set_list(0, h, 5, {last, 0, last});
    problem.set_list(0, h, 6, {empty, last});
  }
  expect_gpu_forward_matches(problem, true, 0);
}

INSTANTIATE_TEST_SUITE_P(DimsBlocksLayouts, CudaForwardLists,
                         ::testing::Combine(::testing::Values(64, 128), ::testing::Values(64, 128),
                                            ::testing::Values(Layout::bhsd, Layout::bshd)));

// Scores that span tens of log2 units (scale 64/sqrt(D): their spread is
// ~31 units with the drawn values): along a row's list the running max rises
// past a tile by more than the online softmax's slack on some rows and by
// less on others, whose exponentials are then taken against an older max
// (P up to 2^8); in fp16, exponentials taken against a max that never moved
// would overflow. Random lists of up to 12 entries with repeats, partial and
// empty blocks.
class CudaForwardSteepScores : public ::testing::TestWithParam<std::tuple<int, int, DType>> {};

TEST_P(CudaForwardSteepScores, RunningMaxMovesOrLagsAndMatchesReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const auto [head_dim, block, dtype] = GetParam();
  AttentionCase c;
  c.dtype = dtype;
  c.head_dim = head_dim;
  c.block = block;
  c.scale = 64.0f / std::sqrt(static_cast<float>(head_dim));
  c.num_q_blocks = 5;
  c.num_kv_blocks = 6;
  c.max_kv = 12;
  c.duplicates = true;
  AttentionProblem problem(c, next_seed());
  expect_gpu_forward_matches(problem, true, 0);
}

INSTANTIATE_TEST_SUITE_P(DimsBlocksTypes, CudaForwardSteepScores,
                         ::testing::Combine(::testing::Values(64, 128), ::testing::Values(64, 128),
                                            ::testing::Values(DType::bf16, DType::f16)));

// More query tiles than a persistent grid has consumers (two per SM: 264 on
// an H200), so every consumer warpgroup of the Hopper forward's v3 runs
// several work items and its Q, K and V rings wrap across items: 600 tiles
// of random lists (lengths 0 to 4, partial and empty blocks), batch 2, GQA.
class CudaForwardManyTiles : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CudaForwardManyTiles, EveryConsumerRunsSeveralItems) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const auto [head_dim, block] = GetParam();
  AttentionCase c;
  c.dtype = DType::bf16;
  c.head_dim = head_dim;
  c.block = block;
  c.batch = 2;
  c.heads = 2;
  c.kv_heads = 1;
  c.num_q_blocks = 150 * 64 / block;
  c.num_kv_blocks = 12;
  c.max_kv = 4;
  AttentionProblem problem(c, next_seed());
  expect_gpu_forward_matches(problem, true, 0);
}

INSTANTIATE_TEST_SUITE_P(DimsAndBlocks, CudaForwardManyTiles,
                         ::testing::Combine(::testing::Values(64, 128), ::testing::Values(64, 128)));

TEST(CudaDevice, CallersCurrentDeviceIsKept) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) GTEST_SKIP() << "needs two CUDA devices";
  AttentionProblem problem(on_gpu(attention_cases().front()), next_seed());
  expect_gpu_forward_matches(problem, true, 1);
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
