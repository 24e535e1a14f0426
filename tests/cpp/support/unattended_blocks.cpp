#include "support/unattended_blocks.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace vsa::test {

void set_unattended_blocks_and_empty_rows(AttentionProblem& problem) {
  problem.set_vbs(1, 0);
  problem.set_vbs(3, 64);  // real keys, so only being unlisted makes its gradient zero
  for (std::int64_t h = 0; h < 2; ++h) {
    problem.set_list(0, h, 0, {});      // count 0
    problem.set_list(0, h, 1, {1});     // only a zero-size block
    problem.set_list(0, h, 2, {2, 0});  // nobody lists block 3
  }
}

void expect_unattended_gradients_zero(const AttentionProblem& problem) {
  const auto all_zero = [](const HostTensor& t, std::int64_t begin, std::int64_t end) {
    for (std::int64_t e = begin; e < end; ++e)
      if (t.get(e) != 0.0) return false;
    return true;
  };
  const std::int64_t block_elems = 64 * 64;  // bhsd, head 0 first
  EXPECT_TRUE(all_zero(problem.dq, 0, 2 * block_elems)) << "dq of rows with nothing to attend";
  EXPECT_FALSE(all_zero(problem.dq, 2 * block_elems, 3 * block_elems));
  EXPECT_TRUE(all_zero(problem.dk, 1 * block_elems, 2 * block_elems)) << "dk of a zero-size block";
  EXPECT_TRUE(all_zero(problem.dv, 3 * block_elems, 4 * block_elems)) << "dv of an unlisted block";
}

}  // namespace vsa::test
