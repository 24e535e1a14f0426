// The op contract (README.md, "The op contract"), written again from it and
// independently of src/core/check.cpp: which calls of vsa::check_inputs and
// vsa::forward must succeed. The fuzzers hold the library to it both ways —
// a valid call that raises is as much a bug as an invalid one that runs.
#pragma once

#include <string>
#include <vsa/vsa.hpp>

namespace vsa::fuzz {

// Whether a call must succeed, and if not the first rule it breaks.
struct Verdict {
  bool ok = true;
  std::string broken;  // the rule, for the crash report
  ProblemShape shape{};  // when ok: what check_inputs must return
};

// Shapes, dtypes, strides and devices of the six inputs, layout and scale
// (never tensor contents): exactly what vsa::check_inputs accepts.
Verdict inputs_verdict(const AttentionInputs& in);

// out (and lse when need_lse) for inputs already found valid.
Verdict outputs_verdict(const ForwardParams& p, const ProblemShape& s);

// out, dout, lse, dq, dk and dv of a backward call for inputs already found
// valid (the contract: out, dout and dq shaped and typed as q, dk and dv as
// k, lse as the forward writes it).
Verdict backward_tensors_verdict(const BackwardParams& p, const ProblemShape& s);

// The host-resident metadata values for valid inputs: counts in [0, max_kv],
// the first count ids of each row in [0, NK), vbs and q_vbs in [0, blk].
Verdict metadata_verdict(const AttentionInputs& in, const ProblemShape& s);

}  // namespace vsa::fuzz
