// vsa::forward on the CPU against the float64 dense reference.
#include <gtest/gtest.h>

#include <cstdlib>

#include "attention_cases.hpp"

namespace vsa::test {
namespace {

class ForwardMatchesReference : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(ForwardMatchesReference, OutAndLse) {
  const std::uint64_t seed = next_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  AttentionProblem problem(GetParam(), seed);
  vsa::forward(problem.forward_params());
  problem.expect_forward_matches();
}

INSTANTIATE_TEST_SUITE_P(Cases, ForwardMatchesReference, ::testing::ValuesIn(attention_cases()), case_name);

AttentionCase small_case() {
  AttentionCase c;
  c.num_q_blocks = 4;
  c.num_kv_blocks = 4;
  c.max_kv = 4;
  return c;
}

TEST(Forward, EmptyRowsAreExactlyZeroWithTheSentinelLse) {
  AttentionProblem problem(small_case(), next_seed());
  problem.set_vbs(2, 0);
  problem.set_vbs(3, 0);
  problem.set_list(0, 0, 0, {});         // count 0
  problem.set_list(0, 0, 1, {3, 2, 3});  // only zero-size blocks
  problem.set_list(0, 1, 2, {1, 3});     // a zero-size block next to a real one
  vsa::forward(problem.forward_params());
  problem.expect_forward_matches();
  for (std::int64_t s = 0; s < 2 * 64; ++s) {
    EXPECT_EQ(problem.lse.get(s), kEmptyRowLse) << "row " << s;
    for (std::int64_t x = 0; x < 64; ++x) ASSERT_EQ(problem.out.get(problem.out.flat_index(0, 0, s, x)), 0.0);
  }
  const std::int64_t head1_block2_row0 = 4 * 64 + 2 * 64;  // lse is [B, H, Sq]
  EXPECT_NE(problem.lse.get(head1_block2_row0), kEmptyRowLse);
}

TEST(Forward, EveryRowEmpty) {
  AttentionProblem problem(small_case(), next_seed());
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 4; ++i) problem.set_list(0, h, i, {});
  vsa::forward(problem.forward_params());
  problem.expect_forward_matches();
}

TEST(Forward, DenseListsWithFullBlocks) {
  AttentionProblem problem(small_case(), next_seed());
  for (std::int64_t j = 0; j < 4; ++j) problem.set_vbs(j, 64);
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 4; ++i) problem.set_list(0, h, i, {3, 1, 0, 2});
  vsa::forward(problem.forward_params());
  problem.expect_forward_matches();
}

TEST(Forward, OrderWithinAListDoesNotMatter) {
  AttentionProblem problem(small_case(), next_seed());
  problem.set_list(0, 0, 0, {0, 1, 2});
  vsa::forward(problem.forward_params());
  const std::vector<double> sorted = problem.bhsd_values(problem.out);
  problem.set_list(0, 0, 0, {2, 0, 1});
  vsa::forward(problem.forward_params());
  const std::vector<double> shuffled = problem.bhsd_values(problem.out);
  EXPECT_LE(relative_error(shuffled, sorted), 1e-6);
}

TEST(Forward, DuplicateBlockCountsTwice) {
  AttentionProblem problem(small_case(), next_seed());
  problem.set_list(0, 0, 0, {1, 1});
  problem.set_list(0, 0, 1, {1});
  vsa::forward(problem.forward_params());
  problem.expect_forward_matches();  // the reference weighs duplicated keys twice
  // Listing one block twice doubles every weight: the output is unchanged but
  // the LSE grows by exactly log2(2) = 1.
  const double lse_twice = problem.lse.get(0), lse_once = problem.lse.get(64);
  problem.set_list(0, 0, 1, {1, 1});
  problem.set_list(0, 0, 0, {1});
  vsa::forward(problem.forward_params());
  EXPECT_NEAR(lse_twice - problem.lse.get(0), 1.0, 1e-5);
  EXPECT_NEAR(problem.lse.get(64) - lse_once, 1.0, 1e-5);
}

// Padding query rows (q_variable_block_sizes) are empty rows (exact zeros and
// the sentinel, which expect_forward_matches checks), and the real rows get
// what the call without q_variable_block_sizes gives them, to rounding: the
// products run over fewer rows, and OpenBLAS rounds a product's edge rows
// (past its kernel's unroll) differently from the rows of a whole tile.
TEST(Forward, QueryPaddingLeavesRealRowsUnchanged) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    const AttentionCase c = query_padding_case(dtype);
    AttentionProblem problem(c, next_seed());
    vsa::forward(problem.forward_params());
    problem.expect_forward_matches();
    const HostTensor out = problem.out, lse = problem.lse;
    ForwardParams p = problem.forward_params();
    p.in.q_variable_block_sizes = TensorRef{};  // every row real (the padding rows' q is garbage)
    vsa::forward(p);
    std::vector<double> with_out, without_out, with_lse, without_lse;
    for (std::int64_t h = 0; h < c.heads; ++h)
      for (std::int64_t s = 0; s < c.seq_q(); ++s) {
        if (problem.padding_row(s)) continue;
        with_lse.push_back(lse.get(h * c.seq_q() + s));
        without_lse.push_back(problem.lse.get(h * c.seq_q() + s));
        for (std::int64_t x = 0; x < c.head_dim; ++x) {
          with_out.push_back(out.get(out.flat_index(0, h, s, x)));
          without_out.push_back(problem.out.get(out.flat_index(0, h, s, x)));
        }
      }
    ASSERT_FALSE(with_lse.empty());
    // fp32: a few ulp at most; bf16: the rare element whose rounding flips.
    const double limit = dtype == DType::f32 ? 1e-6 : 2e-3;
    EXPECT_LE(relative_error(with_out, without_out), limit) << dtype_name(dtype);
    EXPECT_LE(relative_error(with_lse, without_lse), 1e-6) << dtype_name(dtype);
  }
}

TEST(Forward, NeedLseFalseLeavesLseUntouched) {
  AttentionProblem problem(small_case(), next_seed());
  vsa::forward(problem.forward_params(/*need_lse=*/false));
  problem.expect_forward_matches(/*need_lse=*/false);
}

TEST(Forward, NeedLseFalseAcceptsAnUndefinedLse) {
  AttentionProblem problem(small_case(), next_seed());
  ForwardParams p = problem.forward_params(/*need_lse=*/false);
  p.lse = TensorRef{};
  vsa::forward(p);
  problem.expect_forward_matches(/*need_lse=*/false);
}

TEST(Forward, ResultDoesNotDependOnTheThreadCount) {
  AttentionCase c = small_case();
  c.batch = 2;
  c.dtype = DType::bf16;
  AttentionProblem problem(c, next_seed());
  const char* saved = std::getenv("VSA_NUM_THREADS");
  const std::string restore = saved ? saved : "";
  ::setenv("VSA_NUM_THREADS", "1", 1);
  vsa::forward(problem.forward_params());
  const std::vector<double> serial = problem.bhsd_values(problem.out);
  ::setenv("VSA_NUM_THREADS", "3", 1);
  vsa::forward(problem.forward_params());
  const std::vector<double> threaded = problem.bhsd_values(problem.out);
  if (saved)
    ::setenv("VSA_NUM_THREADS", restore.c_str(), 1);
  else
    ::unsetenv("VSA_NUM_THREADS");
  EXPECT_EQ(serial, threaded);
}

}  // namespace
}  // namespace vsa::test
