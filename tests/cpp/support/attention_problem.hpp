// A random block-sparse attention problem on the host: inputs, metadata,
// poisoned outputs, and checks of the library's results against the float64
// reference.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "support/host_tensor.hpp"
#include "support/reference_attention.hpp"
#include "support/test_seed.hpp"

namespace vsa::test {

struct AttentionCase {
  std::string name = "default";
  std::int64_t batch = 1, heads = 2, kv_heads = 2;
  std::int64_t num_q_blocks = 3, num_kv_blocks = 4, block = 64, head_dim = 64;
  std::int64_t max_kv = 3;
  DType dtype = DType::f32;
  DType idx_dtype = DType::i32, num_dtype = DType::i32, vbs_dtype = DType::i32;
  Layout layout = Layout::bhsd;
  bool padded_rows = false;  // q/k/v/outputs as non-contiguous views with gaps between rows
  bool duplicates = false;   // lists may name a block more than once
  // q_variable_block_sizes given, cutting the query blocks at the boundaries
  // of query_row_cuts() in turn; the q rows past a cut hold finite garbage
  // (512 times the values drawn), as the contract allows.
  bool q_padding = false;
  DType q_vbs_dtype = DType::i32;
  float scale = 0.0f;        // 0: the default 1/sqrt(D)

  std::int64_t seq_q() const { return num_q_blocks * block; }
  std::int64_t seq_kv() const { return num_kv_blocks * block; }
};

// Where the q-padding cases cut query blocks of `block` rows: none, one,
// each side of the 16-row fragment, the 32-row width and the 64-row tile
// edges, the whole block.
std::vector<std::int64_t> query_row_cuts(std::int64_t block);

// Relative Frobenius tolerance against the float64 reference for the case's input dtype.
double tolerance(DType dtype);
// The same for lse, which is float32 in every dtype and computed from the inputs as they are
// (the reference reads them rounded too): the CPU backend is within 2e-7 of the reference for
// every input dtype (3,000 sweep cases). tolerance() would let a 16-bit lse off by one row in
// each block (0.5 %) or by 0.02 everywhere pass; 1e-4 leaves the GPU's exp2/log2 approximations
// a wide margin.
double lse_tolerance(DType dtype);

class AttentionProblem {
 public:
  // Random inputs and metadata: list lengths uniform in [0, max_kv] (so some
  // rows are empty and lengths differ), ids unsorted, padding past the count
  // filled with -1 and out-of-range garbage (NK, NK + 1000, INT32_MAX,
  // INT32_MIN); vbs mixes full, partial and zero blocks, and the keys and
  // values past a block's vbs are NaN.
  AttentionProblem(const AttentionCase& c, std::uint64_t seed);

  // Replace the list of query block i of (b, h), padding the rest as above.
  void set_list(std::int64_t b, std::int64_t h, std::int64_t i, const std::vector<std::int64_t>& blocks);
  // Also refills the block's keys and values (NaN past `valid`).
  void set_vbs(std::int64_t block, std::int64_t valid);
  // q_variable_block_sizes[block] = real (q_padding cases only); refills the
  // block's q rows (garbage past `real`).
  void set_q_vbs(std::int64_t block, std::int64_t real);
  // Whether row `seq` of the query sequence is padding (past its block's q_vbs).
  bool padding_row(std::int64_t seq) const;

  AttentionInputs inputs() const;
  // Outputs are poisoned by these; the params point at them.
  ForwardParams forward_params(bool need_lse = true);
  // dout random; out and lse taken from the reference forward (rounded to
  // the dtype), so the backward is checked independently of the forward.
  // Padding query rows get NaN in out and lse, which nothing may read, and
  // finite garbage in dout (512 times the values drawn).
  BackwardParams backward_params();

  ReferenceProblem reference() const;
  // Logical [B, H, S, D] values of a q/k/v-shaped tensor in either layout.
  std::vector<double> bhsd_values(const HostTensor& t) const;

  // Compare the results of the last forward/backward call to the reference
  // (gtest expectations inside).
  void expect_forward_matches(bool need_lse = true) const;
  // Returns the float64 gradients it compared against; `added` (empty vectors: nothing) is
  // added to them first, element by element (mean_grad_addends.hpp).
  ReferenceGradients expect_backward_matches(const ReferenceGradients& added = {}) const;

  const AttentionCase& spec() const { return case_; }

  HostTensor q, k, v, q2k_idx, q2k_num, vbs;
  HostTensor q_vbs;  // [NQ], only with spec().q_padding
  HostTensor out, lse, dout, dq, dk, dv;

 private:
  HostTensor sequence_tensor(std::int64_t heads, std::int64_t seq) const;
  // Block j's keys and values: the random values below vbs[j], the poison
  // (NaN) past it, where no backend may let them reach a result.
  void fill_kv_block(std::int64_t j);
  // Query block i's rows: the drawn values below q_vbs[i], garbage past it.
  void fill_q_block(std::int64_t i);
  // The element indices of row `seq` (all heads, batches and D) of a
  // q-shaped tensor.
  template <class Visit>
  void each_element_of_row(const HostTensor& t, std::int64_t seq, Visit&& visit) const;

  AttentionCase case_;
  std::mt19937_64 rng_;
  HostTensor q_values_, k_values_, v_values_;  // q, k and v as drawn, padding included
};

}  // namespace vsa::test
