// Block-mean gradient addends of the backward (BackwardParams::dq_mean,
// dk_mean, dv_mean): random float32 means for a problem, and what they add to
// each gradient element in the reference's [B, H, S, D] order, so a backward
// that takes them is checked against the float64 reference plus that.
#pragma once

#include <random>

#include "support/attention_problem.hpp"

namespace vsa::test {

struct MeanGradAddends {
  HostTensor dq_mean, dk_mean, dv_mean;  // empty where not drawn
  ReferenceGradients added;              // per gradient element: mean / count on a block's valid rows, else 0
  void set_on(BackwardParams& p) const;
};

// Draws the addends named by the flags (the others stay empty and add 0).
MeanGradAddends draw_mean_grad_addends(const AttentionProblem& problem, std::mt19937_64& rng, bool dq, bool dk,
                                       bool dv);

}  // namespace vsa::test
