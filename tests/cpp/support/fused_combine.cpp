#include "support/fused_combine.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace vsa::test {

CombineAddend draw_combine_addend(const AttentionProblem& problem, std::mt19937_64& rng, bool gated,
                                  bool keep_fine) {
  const AttentionCase& c = problem.spec();
  CombineAddend a;
  a.coarse = HostTensor(DType::f32, {c.batch, c.heads, c.num_q_blocks, c.head_dim});
  a.coarse.fill_random(rng);
  a.gate = problem.q;  // the same view (padded rows included), new values
  a.gate.fill_random(rng);
  a.gated = gated;
  a.fine = problem.out;  // the same view (padded rows included), poisoned before each fused run
  a.keep_fine = keep_fine;
  return a;
}

CombineAddend draw_combine_addend(const AttentionProblem& problem, std::mt19937_64& rng, AddendKind kind) {
  return draw_combine_addend(problem, rng, kind != AddendKind::no_gate, kind == AddendKind::gated_keeping_fine);
}

const char* addend_kind_name(AddendKind kind) {
  switch (kind) {
    case AddendKind::no_gate: return "no_gate";
    case AddendKind::gated: return "gated";
    case AddendKind::gated_keeping_fine: return "gated_keeping_fine";
  }
  return "?";
}

void expect_fused_combine_matches(AttentionProblem& problem, CombineAddend& addend,
                                  const std::function<void(CombinePath path)>& run) {
  HostTensor plain_out;
  if (addend.keep_fine) {
    run(CombinePath::forward_only);
    plain_out = problem.out;
  }
  run(CombinePath::forward_then_combine);
  const HostTensor unfused_out = problem.out, unfused_lse = problem.lse;
  addend.fine.poison();
  run(CombinePath::fused);
  EXPECT_TRUE(problem.out.written_exactly_view()) << "out: some element not written, or a gap written";
  EXPECT_TRUE(problem.out.same_bytes(unfused_out)) << "fused out differs from forward + gate_combine";
  EXPECT_TRUE(problem.lse.same_bytes(unfused_lse)) << "fused lse differs from the plain forward's";
  if (addend.keep_fine) {
    EXPECT_TRUE(addend.fine.written_exactly_view()) << "fine: some element not written, or a gap written";
    EXPECT_TRUE(addend.fine.same_bytes(plain_out)) << "kept fine differs from the plain forward's out";
  }

  // Independently of the unfused path: the float64 attention plus coarse · gate.
  const AttentionCase& c = problem.spec();
  const std::vector<double> fine = reference_forward(problem.reference()).out;
  const std::vector<double> gate = problem.bhsd_values(addend.gate);
  std::vector<double> want(fine.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto row = static_cast<std::int64_t>(i) / c.head_dim;  // (b, h, token) in bhsd order
    const std::int64_t token = row % c.seq_q(), bh = row / c.seq_q();
    const double coarse = addend.coarse.get((bh * c.num_q_blocks + token / c.block) * c.head_dim +
                                            static_cast<std::int64_t>(i) % c.head_dim);
    want[i] = fine[i] + coarse * (addend.gated ? gate[i] : 1.0);
  }
  EXPECT_LE(relative_error(problem.bhsd_values(problem.out), want), tolerance(c.dtype)) << "fused out";
}

}  // namespace vsa::test
