// Randomized sweep of the CUDA backend against the CPU backend (itself
// swept against the float64 reference in tests/cpp/random_sweep_test.cpp):
// random cases on every contract axis, garbage past every list's count,
// poisoned outputs, and the forward repeated to check it is bitwise
// deterministic. VSA_GPU_SWEEP_CASES sets the count (default 40; the GPU
// script's reliability stage runs 1000 per kernel, VSA_CUDA_KERNEL=sm90 and
// sm80); VSA_SWEEP_SEED replays a sweep. Skipped without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/kernel_choice.hpp"
#include "cuda/sm90/fwd_launch.hpp"
#include "device_buffer.hpp"
#include "scoped_env.hpp"
#include "support/random_case.hpp"

namespace vsa::test {
namespace {

constexpr std::int64_t kDefaultCases = 40;

struct ForwardResult {
  HostTensor out, lse;
};

ForwardResult cpu_forward(AttentionProblem& problem, bool need_lse) {
  vsa::forward(problem.forward_params(need_lse));
  return {problem.out, problem.lse};
}

// The same call on device 0, outputs poisoned on the device first.
ForwardResult gpu_forward(AttentionProblem& problem, bool need_lse) {
  const DeviceForward call(problem, need_lse);
  vsa::forward(call.params);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  call.copy_back();
  return {problem.out, problem.lse};
}

// Relative error of the GPU result against the CPU backend's; rows the CPU
// found empty must be exactly zero with the sentinel lse on the GPU too.
void expect_same_forward(const AttentionProblem& problem, const ForwardResult& gpu, const ForwardResult& cpu,
                         bool need_lse) {
  const double limit = tolerance(problem.spec().dtype);
  EXPECT_TRUE(gpu.out.written_exactly_view()) << "out: an element not written, or a gap written";
  const std::vector<double> gpu_out = problem.bhsd_values(gpu.out), cpu_out = problem.bhsd_values(cpu.out);
  EXPECT_LE(relative_error(gpu_out, cpu_out), limit) << "out";
  if (!need_lse) {
    EXPECT_TRUE(gpu.lse.untouched()) << "need_lse = false wrote lse";
    return;
  }
  EXPECT_TRUE(gpu.lse.written_exactly_view()) << "lse: an element not written";
  std::vector<double> gpu_lse, cpu_lse;
  const auto dim = static_cast<std::size_t>(problem.spec().head_dim);
  for (std::int64_t row = 0; row < cpu.lse.numel(); ++row) {
    if (cpu.lse.get(row) == kEmptyRowLse) {
      ASSERT_EQ(gpu.lse.get(row), kEmptyRowLse) << "empty row " << row;
      const auto first = gpu_out.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(row) * dim);
      ASSERT_TRUE(std::all_of(first, first + static_cast<std::ptrdiff_t>(dim), [](double x) { return x == 0.0; }))
          << "empty row " << row << " is not zero";
    } else {
      gpu_lse.push_back(gpu.lse.get(row));
      cpu_lse.push_back(cpu.lse.get(row));
    }
  }
  // The CPU backend is within 2e-7 of float64 here, so the GPU is held to lse_tolerance as against
  // the reference (out's 16-bit tolerance would let a row's lse be off by a block's share).
  EXPECT_LE(relative_error(gpu_lse, cpu_lse), lse_tolerance(problem.spec().dtype)) << "lse";
}

// Runs `body(problem, rng)` on VSA_GPU_SWEEP_CASES random cases,
// stopping at the first that fails; each failure names its replay seed.
template <class Body>
void sweep(const char* what, Body&& body) {
  const std::int64_t cases = sweep_cases("VSA_GPU_SWEEP_CASES", kDefaultCases);
  const std::uint64_t first_seed = sweep_seed();
  const std::string kernel = cuda_forward_kernel(0);
  ::testing::Test::RecordProperty("first_seed", std::to_string(first_seed));
  for (std::int64_t n = 0; n < cases; ++n) {
    const std::uint64_t seed = first_seed + static_cast<std::uint64_t>(n);
    std::mt19937_64 rng(seed);
    const AttentionCase c = random_attention_case(rng, SweepBackend::cuda);
    SCOPED_TRACE("case " + std::to_string(n) + " (" + kernel + " kernel): " + describe(c) +
                 "; replay with VSA_SWEEP_SEED=" + std::to_string(seed) + " VSA_GPU_SWEEP_CASES=1");
    AttentionProblem problem(c, seed);
    randomize_block_sizes(problem, rng);
    try {
      body(problem, rng);
    } catch (const Error& e) {  // reported here, where the trace names the case
      ADD_FAILURE() << "vsa::Error: " << e.what();
    }
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("CudaSweep %s: %lld cases passed on the %s kernel (first seed %llu)\n", what,
              static_cast<long long>(cases), kernel.c_str(), static_cast<unsigned long long>(first_seed));
}

void forward_case(AttentionProblem& problem, std::mt19937_64& rng) {
  const bool need_lse = rng() % 4 != 0;
  const ForwardResult cpu = cpu_forward(problem, need_lse);
  const ForwardResult first = gpu_forward(problem, need_lse);
  expect_same_forward(problem, first, cpu, need_lse);
  const ForwardResult again = gpu_forward(problem, need_lse);
  EXPECT_TRUE(again.out.same_bytes(first.out)) << "out differs between two identical runs";
  EXPECT_TRUE(again.lse.same_bytes(first.lse)) << "lse differs between two identical runs";
}

TEST(CudaSweep, ForwardMatchesTheCpuBackendAndRepeatsBitwise) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  sweep("forward", forward_case);
}

// The same with forward v2's list walks phased by one SM's CTAs (list_walk.cuh): the walks of
// these small problems then start at every place in their lists, and wrap around.
TEST(CudaSweep, PhasedListWalksMatchTheCpuBackendAndRepeatBitwise) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const ScopedEnv phase("VSA_CUDA_WALK_PHASE", "1");
  sweep("forward, phased walks", forward_case);
}

// Forward v2's default phase, grown over a launch's first waves (walk_start.hpp), on a launch
// two waves longer than the ramp: CTAs start in list order, at part of their place's share of
// the list, and at all of it, and the walks that start mid-list wrap around. bf16 at D = 64:
// the device's SMs times v2's four CTAs an SM, one CTA per 64-row query tile.
TEST(CudaSweep, RampedPhaseOnALongLaunchMatchesTheCpuBackend) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const ScopedEnv phase("VSA_CUDA_WALK_PHASE", "on");
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  AttentionCase c;
  c.dtype = DType::bf16;
  c.head_dim = 64;
  c.block = 64;
  c.heads = 4;
  c.kv_heads = 2;
  c.num_kv_blocks = 24;
  c.max_kv = 8;
  c.num_q_blocks = (cuda::kWalkRampWaves + 2) * sms * cuda::sm90::kTmaFwdCtasPerSm / c.heads;
  AttentionProblem problem(c, sweep_seed());
  const ForwardResult cpu = cpu_forward(problem, true);
  const ForwardResult gpu = gpu_forward(problem, true);
  expect_same_forward(problem, gpu, cpu, true);
}

// The backward on device 0, with the workspace the API asks for; dq, dk, dv
// come back into the problem's host tensors.
void gpu_backward(AttentionProblem& problem, const BackwardParams& host) {
  DeviceBackward call(problem, host);
  call.run();
}

TEST(CudaSweep, BackwardMatchesTheCpuBackend) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  sweep("backward", [](AttentionProblem& problem, std::mt19937_64& rng) {
    BackwardParams host = problem.backward_params();  // dq, dk, dv poisoned
    host.deterministic = rng() % 2 == 0;  // both ways of computing dq
    gpu_backward(problem, host);
    // Against the float64 gradient, every element written.
    const ReferenceGradients exact = problem.expect_backward_matches();
    const HostTensor gpu[] = {problem.dq, problem.dk, problem.dv};
    for (HostTensor* t : {&problem.dq, &problem.dk, &problem.dv}) t->poison();
    vsa::backward(host);
    // Against the CPU backend, relative to the exact gradient's norm: where
    // that is zero (every row attends one key) both backends hold only
    // rounding noise, which must not be compared with itself.
    const HostTensor* cpu[] = {&problem.dq, &problem.dk, &problem.dv};
    const std::vector<double>* exact_grads[] = {&exact.dq, &exact.dk, &exact.dv};
    const char* names[] = {"dq", "dk", "dv"};
    for (int g = 0; g < 3; ++g)
      EXPECT_LE(relative_difference(problem.bhsd_values(gpu[g]), problem.bhsd_values(*cpu[g]), *exact_grads[g]),
                tolerance(problem.spec().dtype))
          << names[g] << ": CUDA against the CPU backend";
  });
}

}  // namespace
}  // namespace vsa::test
