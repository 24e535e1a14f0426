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

inline std::string case_name(const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; }

// gtest prints parameters on failure; the name says which case it was.
inline void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

}  // namespace vsa::test
