// The gate combine fused into the forward's epilogue (ForwardParams::coarse,
// gate), checked the same way on every backend: the fused forward must give
// bitwise what the forward followed by gate_combine gives (out and lse), write
// exactly out's view, and match the float64 reference out + coarse · gate.
#pragma once

#include <functional>
#include <random>

#include "support/attention_problem.hpp"

namespace vsa::test {

struct CombineAddend {
  HostTensor coarse;  // [B, H, NQ, D] float32, random
  HostTensor gate;    // q's shape, dtype and strides, random; unused when !gated
  bool gated = true;

  TensorRef gate_ref() const { return gated ? gate.ref() : TensorRef{}; }
};

CombineAddend draw_combine_addend(const AttentionProblem& problem, std::mt19937_64& rng, bool gated);

// `run(fused)` runs the problem's forward (need_lse true) on the backend under
// test with out and lse poisoned (forward_params()), leaving the results in
// problem.out and problem.lse: with the addend in the forward when `fused`,
// else the plain forward followed by gate_combine of out in place.
void expect_fused_combine_matches(AttentionProblem& problem, const CombineAddend& addend,
                                  const std::function<void(bool fused)>& run);

}  // namespace vsa::test
