// The gate combine fused into the forward's epilogue (ForwardParams::coarse,
// gate, fine), checked the same way on every backend: the fused forward must
// give bitwise what the forward followed by gate_combine gives (out and lse),
// write exactly out's view, and match the float64 reference out + coarse ·
// gate; when it also keeps the attention (fine), that must be bitwise the
// plain forward's out, written exactly over its view.
#pragma once

#include <functional>
#include <random>

#include "support/attention_problem.hpp"

namespace vsa::test {

struct CombineAddend {
  HostTensor coarse;  // [B, H, NQ, D] float32, random
  HostTensor gate;    // q's shape, dtype and strides, random; unused when !gated
  HostTensor fine;    // out's shape, dtype and strides, poisoned; unused when !keep_fine
  bool gated = true;
  bool keep_fine = false;  // the fused forward also writes the attention alone into `fine`

  TensorRef gate_ref() const { return gated ? gate.ref() : TensorRef{}; }
  TensorRef fine_ref() const { return keep_fine ? fine.ref() : TensorRef{}; }
};

CombineAddend draw_combine_addend(const AttentionProblem& problem, std::mt19937_64& rng, bool gated,
                                  bool keep_fine = false);

// The fused forward's variants the case matrices run: what the layer's
// inference path asks (with or without a gate) and its training path (gated
// here, keeping the attention; without a gate in the CUDA list cases).
enum class AddendKind { no_gate, gated, gated_keeping_fine };
CombineAddend draw_combine_addend(const AttentionProblem& problem, std::mt19937_64& rng, AddendKind kind);
const char* addend_kind_name(AddendKind kind);

enum class CombinePath {
  forward_only,          // the plain forward
  forward_then_combine,  // the plain forward, then gate_combine of out in place
  fused,                 // the forward with the addend (coarse, gate_ref(), fine_ref())
};

// `run(path)` runs the problem's forward (need_lse true) on the backend under
// test with out and lse poisoned (forward_params()), leaving the results in
// problem.out and problem.lse, and with a kept attention in addend.fine.
void expect_fused_combine_matches(AttentionProblem& problem, CombineAddend& addend,
                                  const std::function<void(CombinePath path)>& run);

}  // namespace vsa::test
