// The shape facts of the coarse stage's means, derived once from checked
// arguments (core/layer.cpp) and handed to the backends.
#pragma once

#include <cstdint>

namespace vsa::detail {

struct CoarseShape {
  std::int64_t batch, heads, kv_heads, nq, nk, dim;
  float scale;  // resolved: never 0
};

}  // namespace vsa::detail
