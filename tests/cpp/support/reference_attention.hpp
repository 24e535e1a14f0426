// Float64 dense reference for block-sparse attention: the block lists are
// expanded to a token-level multiplicity mask (a block listed twice weighs its
// keys twice) and attention is computed densely with that mask.
#pragma once

#include <cstdint>
#include <vector>

namespace vsa::test {

struct ReferenceProblem {
  std::int64_t batch, heads, kv_heads, seq_q, seq_kv, head_dim, block, max_kv;
  double scale;
  std::vector<double> q, k, v;  // [B, H, Sq, D] and [B, Hkv, Skv, D]
  std::vector<std::int64_t> q2k_idx, q2k_num, vbs;
  // q_variable_block_sizes [NQ]; empty: every query row is real. A row past
  // it attends to nothing: an empty row.
  std::vector<std::int64_t> q_vbs;
};

struct ReferenceForward {
  std::vector<double> out;      // [B, H, Sq, D]
  std::vector<double> lse;      // [B, H, Sq], base 2; meaningless where empty
  std::vector<bool> empty_row;  // [B, H, Sq]: nothing to attend
};

struct ReferenceGradients {
  std::vector<double> dq, dk, dv;
};

ReferenceForward reference_forward(const ReferenceProblem& p);
// The analytic gradient of reference_forward for the upstream gradient dout. With `out` (the
// [B, H, Sq, D] output a backward is given, e.g. rounded to 16 bits), each row's Σ_c P dP is
// taken as rowsum(dout ∘ out), as the backward computes it from its inputs: the gradient of the
// call as made, where at steep softmaxes out's rounding alone moves dq by more than 1 %.
ReferenceGradients reference_backward(const ReferenceProblem& p, const std::vector<double>& dout,
                                      const std::vector<double>* out = nullptr);

}  // namespace vsa::test
