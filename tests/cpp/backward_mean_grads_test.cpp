// The VSA layer's block-mean gradients fused into the CPU backward's writes
// (BackwardParams::dq_mean, dk_mean, dv_mean): over the shared case matrix,
// the float64 reference gradient plus mean / count on each block's valid rows;
// each addend on its own; padding query rows and keys past vbs still exactly
// zero; and the arguments it refuses, with the gradients left untouched.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>

#include "attention_cases.hpp"
#include "support/expect_error.hpp"
#include "support/mean_grad_addends.hpp"

namespace vsa::test {
namespace {

// A backward of `problem` with the addends the flags name, against the reference plus them.
void expect_backward_with_addends_matches(AttentionProblem& problem, std::uint64_t seed, bool dq, bool dk, bool dv) {
  std::mt19937_64 rng(seed + 1);
  const MeanGradAddends add = draw_mean_grad_addends(problem, rng, dq, dk, dv);
  BackwardParams p = problem.backward_params();
  add.set_on(p);
  backward(p);
  problem.expect_backward_matches(add.added);
}

class BackwardMeanGrads : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(BackwardMeanGrads, AddMeanOverCountToEachValidRow) {
  const std::uint64_t seed = next_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  AttentionProblem problem(GetParam(), seed);
  expect_backward_with_addends_matches(problem, seed, true, true, true);
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardMeanGrads, ::testing::ValuesIn(attention_cases()), case_name);

TEST(BackwardMeanGradsAlone, EachAddendOnItsOwn) {
  AttentionCase c;
  c.dtype = DType::bf16;
  c.heads = 4;  // GQA: dk and dv of a KV head sum over its two query heads, the addend is added once
  for (const auto& [dq, dk, dv] : {std::tuple{true, false, false}, std::tuple{false, true, false},
                                   std::tuple{false, false, true}}) {
    const std::uint64_t seed = next_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    AttentionProblem problem(c, seed);
    expect_backward_with_addends_matches(problem, seed, dq, dk, dv);
  }
}

TEST(BackwardMeanGradsAlone, PaddingRowsAndKeysPastVbsStayZero) {
  const AttentionCase c = query_padding_case(DType::bf16);
  const std::uint64_t seed = next_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  AttentionProblem problem(c, seed);
  problem.set_vbs(1, 17);
  expect_backward_with_addends_matches(problem, seed, true, true, true);
  const std::vector<double> dq = problem.bhsd_values(problem.dq);
  for (std::int64_t bh = 0; bh < c.batch * c.heads; ++bh)
    for (std::int64_t t = 0; t < c.seq_q(); ++t)
      for (std::int64_t d = 0; d < c.head_dim && problem.padding_row(t); ++d)
        ASSERT_EQ(dq[static_cast<std::size_t>((bh * c.seq_q() + t) * c.head_dim + d)], 0.0) << "padding row " << t;
  for (const HostTensor* grad : {&problem.dk, &problem.dv}) {
    const std::vector<double> g = problem.bhsd_values(*grad);
    for (std::int64_t bh = 0; bh < c.batch * c.kv_heads; ++bh)
      for (std::int64_t t = 64 + 17; t < 128; ++t)  // block 1, past its 17 valid keys
        for (std::int64_t d = 0; d < c.head_dim; ++d)
          ASSERT_EQ(g[static_cast<std::size_t>((bh * c.seq_kv() + t) * c.head_dim + d)], 0.0) << "key " << t;
  }
}

TEST(BackwardMeanGradsRejects, BadAddendsAndWritesNothing) {
  AttentionCase c;
  c.dtype = DType::bf16;
  c.heads = 4;
  AttentionProblem problem(c, next_seed());
  const std::int64_t nq = c.num_q_blocks, nk = c.num_kv_blocks, d = c.head_dim;
  const HostTensor q_blocks_plus_1(DType::f32, {c.batch, c.heads, nq + 1, d});
  const HostTensor query_heads_for_k(DType::f32, {c.batch, c.heads, nk, d});  // dk_mean has KV heads
  const HostTensor rank3(DType::f32, {c.batch, c.heads, nq * d});
  const HostTensor bf16_mean(DType::bf16, {c.batch, c.kv_heads, nk, d});
  const HostTensor strided = HostTensor::with_row_pitch(DType::f32, {c.batch, c.kv_heads, nk, d}, d + 4);
  const std::tuple<const char*, TensorRef, TensorRef, TensorRef> bad[] = {
      {"dq_mean.shape", q_blocks_plus_1.ref(), {}, {}},
      {"dq_mean", rank3.ref(), {}, {}},
      {"dk_mean.shape", {}, query_heads_for_k.ref(), {}},
      {"dk_mean.dtype", {}, bf16_mean.ref(), {}},
      {"dv_mean.stride", {}, {}, strided.ref()},
  };
  for (const auto& [argument, dq_mean, dk_mean, dv_mean] : bad) {
    BackwardParams p = problem.backward_params();
    p.dq_mean = dq_mean;
    p.dk_mean = dk_mean;
    p.dv_mean = dv_mean;
    expect_error_on(argument, [&] { backward(p); });
    EXPECT_TRUE(problem.dq.untouched() && problem.dk.untouched() && problem.dv.untouched()) << argument;
  }
}

}  // namespace
}  // namespace vsa::test
