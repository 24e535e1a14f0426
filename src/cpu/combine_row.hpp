// One token row of the VSA layer's gate combine on the CPU: out = fine +
// coarse · gate (no gate: gate 1), each element by layer_arithmetic's
// combine_step and rounded once to T. Shared by the combine pass
// (gate_combine.cpp) and the forward's fused epilogue (forward.cpp), so the
// two give the same bits.
#pragma once

#include <cstdint>

#include "core/layer_arithmetic.hpp"
#include "cpu/element_types.hpp"

namespace vsa::cpu {

// `out` may be `fine`: each element is read before it is written.
template <class T>
void combine_row(const T* fine, const float* coarse, const T* gate, T* out, std::int64_t n) {
  for (std::int64_t d = 0; d < n; ++d)
    out[d] = from_float<T>(detail::combine_step(to_float(fine[d]), coarse[d], gate ? to_float(gate[d]) : 1.0f));
}

}  // namespace vsa::cpu
