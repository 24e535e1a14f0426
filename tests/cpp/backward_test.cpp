// vsa::backward on the CPU against the analytic float64 gradient of the
// dense reference.
#include <gtest/gtest.h>

#include "attention_cases.hpp"
#include "core/check.hpp"
#include "cpu/cpu_backend.hpp"
#include "support/unattended_blocks.hpp"

namespace vsa::test {
namespace {

class BackwardMatchesReference : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(BackwardMatchesReference, DqDkDv) {
  const std::uint64_t seed = next_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  AttentionProblem problem(GetParam(), seed);
  vsa::backward(problem.backward_params());
  problem.expect_backward_matches();
}

INSTANTIATE_TEST_SUITE_P(Cases, BackwardMatchesReference, ::testing::ValuesIn(attention_cases()), case_name);

TEST(Backward, UnattendedBlocksAndEmptyRowsGetZeroGradients) {
  AttentionCase c;
  c.num_q_blocks = 3;
  c.num_kv_blocks = 4;
  AttentionProblem problem(c, next_seed());
  set_unattended_blocks_and_empty_rows(problem);
  vsa::backward(problem.backward_params());
  problem.expect_backward_matches();
  expect_unattended_gradients_zero(problem);
}

// Padding query rows hold NaN in out and lse and 512 times their drawn
// values in q and dout (backward_params): a row that reached dk or dv would
// show in the comparison with the reference; their dq rows are exactly zero;
// and the real rows' dq is what the call without q_variable_block_sizes gives
// them (whose dk and dv the padding rows then spoil), to the rounding of the
// products' edge rows (forward_test.cpp, QueryPaddingLeavesRealRowsUnchanged).
TEST(Backward, QueryPaddingRowsGetZeroDqAndAddNothing) {
  const AttentionCase c = query_padding_case(DType::f32);
  AttentionProblem problem(c, next_seed());
  BackwardParams p = problem.backward_params();
  vsa::backward(p);
  problem.expect_backward_matches();
  const HostTensor dq = problem.dq;
  problem.dq.poison();
  p.in.q_variable_block_sizes = TensorRef{};
  vsa::backward(p);
  std::vector<double> with_q_vbs, without;
  for (std::int64_t h = 0; h < c.heads; ++h)
    for (std::int64_t s = 0; s < c.seq_q(); ++s) {
      const bool padding = problem.padding_row(s);
      for (std::int64_t x = 0; x < c.head_dim; ++x) {
        const std::int64_t flat = dq.flat_index(0, h, s, x);
        if (padding) {
          ASSERT_EQ(dq.get(flat), 0.0) << "padding row " << s << " of head " << h;
        } else {
          with_q_vbs.push_back(dq.get(flat));
          without.push_back(problem.dq.get(flat));
        }
      }
    }
  ASSERT_LT(with_q_vbs.size(), static_cast<std::size_t>(dq.numel())) << "no padding row";
  EXPECT_LE(relative_error(with_q_vbs, without), 1e-6);
}

// The backward stores P and dS of as many query blocks as fit its budget; a
// budget of one float runs every query block as its own chunk, and must give
// the same bits (every sum keeps its order) and the reference's values.
TEST(Backward, ChunkedStoreGivesTheSameGradients) {
  AttentionCase c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.num_q_blocks = 3;
  c.max_kv = 4;
  c.duplicates = true;
  c.dtype = DType::bf16;
  AttentionProblem problem(c, next_seed());
  const BackwardParams p = problem.backward_params();
  vsa::backward(p);
  const std::vector<std::vector<double>> whole = {problem.bhsd_values(problem.dq), problem.bhsd_values(problem.dk),
                                                  problem.bhsd_values(problem.dv)};
  for (HostTensor* t : {&problem.dq, &problem.dk, &problem.dv}) t->poison();
  const ProblemShape s = check_inputs(p.in);
  cpu::backward(p, s, detail::resolved_scale(p.in, s), /*store_floats=*/1);
  problem.expect_backward_matches();
  EXPECT_EQ(problem.bhsd_values(problem.dq), whole[0]);
  EXPECT_EQ(problem.bhsd_values(problem.dk), whole[1]);
  EXPECT_EQ(problem.bhsd_values(problem.dv), whole[2]);
}

}  // namespace
}  // namespace vsa::test
