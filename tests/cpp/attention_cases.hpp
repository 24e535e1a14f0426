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

// Seven query blocks cut at the seven boundaries of query_row_cuts (from a
// random one on), GQA 4 -> 2, lists of up to 4 of the 4 KV blocks: the
// q-padding problem the dedicated tests of every backend share.
AttentionCase query_padding_case(DType dtype, Layout layout = Layout::bhsd);

inline std::string case_name(const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; }

// gtest prints parameters on failure; the name says which case it was.
inline void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

}  // namespace vsa::test
