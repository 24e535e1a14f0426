// The shared matrix of attention cases that forward and backward tests both
// run: every dtype, layout, block size, head dim and metadata variant.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "support/attention_problem.hpp"

namespace vsa::test {

std::vector<AttentionCase> attention_cases();

// Two batches of GQA 4 -> 2 over four 64-token blocks each way, lists of up to 3: a small case
// with every axis above 1, for tests about arguments rather than arithmetic.
AttentionCase small_gqa_case(DType dtype = DType::f32, Layout layout = Layout::bhsd);

// Seven query blocks cut at the seven boundaries of query_row_cuts (from a
// random one on), GQA 4 -> 2, lists of up to 4 of the 4 KV blocks: the
// q-padding problem the dedicated tests of every backend share.
AttentionCase query_padding_case(DType dtype, Layout layout = Layout::bhsd);

// Two query blocks, bf16, one KV block per entry of `cuts` (its valid keys), for the
// partial-block tests of every kernel; list_every_block then has every query block of
// every head list every KV block, the blocks cut as given.
AttentionCase partial_blocks_case(int head_dim, int block, const std::vector<std::int64_t>& cuts);
void list_every_block(AttentionProblem& problem, const AttentionCase& c, const std::vector<std::int64_t>& cuts);

inline std::string case_name(const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; }

// gtest prints parameters on failure; the name says which case it was.
inline void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

}  // namespace vsa::test
