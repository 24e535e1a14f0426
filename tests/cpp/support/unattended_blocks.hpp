// The backward's edge case that the CPU and CUDA tests share: in each head of
// batch 0, query block 0 lists nothing (count 0), block 1 lists only KV block
// 1, which has no valid keys, and block 2 lists blocks 2 and 0; KV block 3 has
// real keys but nobody lists it.
#pragma once

#include "support/attention_problem.hpp"

namespace vsa::test {

// Sets those lists and block sizes on a problem of 3 query and 4 KV blocks of 64, two heads.
void set_unattended_blocks_and_empty_rows(AttentionProblem& problem);

// After the backward: dq of query blocks 0 and 1 exactly zero (and block 2's not), dk of the
// zero-size block and dv of the unlisted block exactly zero (bhsd, head 0).
void expect_unattended_gradients_zero(const AttentionProblem& problem);

}  // namespace vsa::test
