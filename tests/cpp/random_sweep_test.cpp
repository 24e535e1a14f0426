// Randomized property sweep of the CPU backend against the float64
// reference: forward (with and without lse) and backward on random cases
// that cover every axis of the contract (see support/random_case.hpp).
// VSA_SWEEP_CASES sets the count (CI runs the default sample; the full run
// is 10,000: README "Reliability"); VSA_SWEEP_SEED replays a sweep.
#include <gtest/gtest.h>

#include "support/random_case.hpp"

namespace vsa::test {
namespace {

TEST(RandomSweep, ForwardAndBackwardMatchTheReference) {
  const std::int64_t cases = sweep_cases("VSA_SWEEP_CASES", 150);
  const std::uint64_t first_seed = sweep_seed();
  RecordProperty("first_seed", std::to_string(first_seed));
  for (std::int64_t n = 0; n < cases; ++n) {
    const std::uint64_t seed = first_seed + static_cast<std::uint64_t>(n);
    std::mt19937_64 rng(seed);
    const AttentionCase c = random_attention_case(rng, SweepBackend::cpu);
    SCOPED_TRACE("case " + std::to_string(n) + ": " + describe(c) + "; replay with VSA_SWEEP_SEED=" +
                 std::to_string(seed) + " VSA_SWEEP_CASES=1");
    AttentionProblem problem(c, seed);
    randomize_block_sizes(problem, rng);
    const bool need_lse = rng() % 4 != 0;
    try {
      vsa::forward(problem.forward_params(need_lse));
      problem.expect_forward_matches(need_lse);
      vsa::backward(problem.backward_params());
      problem.expect_backward_matches();
    } catch (const Error& e) {  // reported here, where the trace names the case
      ADD_FAILURE() << "vsa::Error: " << e.what();
    }
    if (HasFailure()) return;  // one failing case is enough to read
  }
  std::printf("RandomSweep: %lld cases passed (first seed %llu)\n", static_cast<long long>(cases),
              static_cast<unsigned long long>(first_seed));
}

}  // namespace
}  // namespace vsa::test
