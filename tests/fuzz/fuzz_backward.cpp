#include <cmath>
#include <string>
#include <vector>

#include "contract_oracle.hpp"
#include "fuzz_attention.hpp"
#include "fuzz_choices.hpp"
#include "fuzz_targets.hpp"
#include "support/host_tensor.hpp"
#include "support/reference_attention.hpp"

namespace vsa::fuzz {
namespace {

// The six inputs, the forward's out and lse, dout, and the three gradients of one call.
struct Call {
  FuzzInputs in;
  FuzzTensor out, dout, lse, dq, dk, dv;
  BackwardParams params;
};

// A valid call's out and lse as the forward writes them: the float64 reference's, rounded to
// their dtypes (the sentinel lse and zero rows where nothing is attended).
test::ReferenceForward write_forward_outputs(Call& c, const test::ReferenceProblem& problem) {
  const test::ReferenceForward f = test::reference_forward(problem);
  c.out.set_bhsd_values(c.params.in.layout, f.out);
  for (std::size_t row = 0; row < f.empty_row.size(); ++row)
    c.lse.set(static_cast<std::int64_t>(row), f.empty_row[row] ? kEmptyRowLse : f.lse[row]);
  return f;
}

// Rows of a [B, H, S, D] gradient that must be exactly zero are zero.
void expect_zero_rows(const std::vector<double>& grad, std::int64_t dim, const std::vector<bool>& zero_row,
                      const char* name, const char* why) {
  for (std::size_t row = 0; row < zero_row.size(); ++row)
    if (zero_row[row])
      for (std::int64_t x = 0; x < dim; ++x)
        if (grad[row * static_cast<std::size_t>(dim) + static_cast<std::size_t>(x)] != 0.0) fail(why, name);
}

void expect_matches_reference(const Call& c, const test::ReferenceProblem& problem,
                              const test::ReferenceForward& forward,
                              const std::vector<std::vector<unsigned char>>& before) {
  const BackwardParams& p = c.params;
  const Layout layout = p.in.layout;
  // The gradient of the call as made: its delta from the out it is given, rounded to the dtype (the
  // fuzzer's scales reach softmaxes steep enough for that rounding alone to move dq past 1e-2).
  const std::vector<double> out = c.out.bhsd_values(layout);
  const test::ReferenceGradients expected = test::reference_backward(problem, c.dout.bhsd_values(layout), &out);
  const double tolerance = p.in.q.dtype == DType::f32 ? 1e-5 : 1e-2;

  // Keys past their block's variable_block_sizes get no gradient.
  std::vector<bool> padding_key(static_cast<std::size_t>(problem.batch * problem.kv_heads * problem.seq_kv));
  for (std::size_t row = 0; row < padding_key.size(); ++row) {
    const auto key = static_cast<std::int64_t>(row) % problem.seq_kv;
    padding_key[row] = key % problem.block >= problem.vbs[static_cast<std::size_t>(key / problem.block)];
  }
  const struct {
    const FuzzTensor* got;
    const std::vector<double>* expected;
    const char* name;
    const std::vector<bool>* zero_row;
    const char* why;
  } grads[] = {
      {&c.dq, &expected.dq, "dq", &forward.empty_row, "a row with nothing to attend (or padding) has a nonzero dq"},
      {&c.dk, &expected.dk, "dk", &padding_key, "a key past its block's size has a nonzero dk"},
      {&c.dv, &expected.dv, "dv", &padding_key, "a key past its block's size has a nonzero dv"}};
  for (const auto& g : grads) {
    const std::vector<double> got = g.got->bhsd_values(layout);
    for (double x : got)
      if (!std::isfinite(x)) fail("backward wrote a value that is not finite", g.name);
    const double error = test::relative_error(got, *g.expected);
    if (!(error <= tolerance))
      fail("a gradient differs from the float64 reference",
           (std::string(g.name) + " " + std::to_string(error)).c_str());
    expect_zero_rows(got, problem.head_dim, *g.zero_row, g.name, g.why);
  }
  if (!c.dq.gaps_equal(before[0]) || !c.dk.gaps_equal(before[1]) || !c.dv.gaps_equal(before[2]))
    fail("backward wrote outside a gradient's view", "");
}

}  // namespace

void fuzz_backward(FuzzedDataProvider& in) {
  const Dims d = pick_dims(in);
  const DType dtype = in.PickValueInArray({DType::f32, DType::bf16, DType::f16});
  const std::int64_t seq_q = d.num_q_blocks * d.block, seq_kv = d.num_kv_blocks * d.block;

  Call c;
  c.in = input_tensors(in, d, dtype);
  // out is written below from the reference, so its heads are never broadcast; dout's may be.
  c.out = sequence_tensor(in, maybe_other_dtype(in, dtype), d, d.heads, seq_q, false);
  c.dout = sequence_tensor(in, maybe_other_dtype(in, dtype), d, d.heads, seq_q, true);
  c.lse = lse_tensor(in, d);
  c.dq = sequence_tensor(in, maybe_other_dtype(in, dtype), d, d.heads, seq_q, false);
  c.dk = sequence_tensor(in, maybe_other_dtype(in, dtype), d, d.kv_heads, seq_kv, false);
  c.dv = sequence_tensor(in, maybe_other_dtype(in, dtype), d, d.kv_heads, seq_kv, false);
  std::mt19937_64 rng = fill_inputs(in, c.in, d, ListsWhenOut::whole);
  c.dout.fill_random(rng);
  for (FuzzTensor* t : {&c.out, &c.lse, &c.dq, &c.dk, &c.dv}) t->fill_bytes(0xff);  // NaN in every float dtype

  BackwardParams& p = c.params;
  p.in = attention_inputs(in, c.in, d.layout);
  p.out = c.out.ref();
  p.dout = c.dout.ref();
  p.lse = c.lse.ref();
  p.dq = c.dq.ref();
  p.dk = c.dk.ref();
  p.dv = c.dv.ref();
  p.deterministic = in.ConsumeBool();
  if (rarely(in)) {  // one tensor missing, or all on a device this build cannot run
    TensorRef* tensors[] = {&p.in.q, &p.in.k, &p.in.v, &p.in.q2k_idx, &p.in.q2k_num, &p.in.variable_block_sizes,
                            &p.out, &p.dout, &p.lse, &p.dq, &p.dk, &p.dv};
    if (in.ConsumeBool())
      in.PickValueInArray(tensors)->data = nullptr;
    else
      for (TensorRef* t : tensors) t->device = Device::cuda;
  }
  add_query_sizes(in, c.in, d);
  if (c.in.q_vbs) p.in.q_variable_block_sizes = c.in.q_vbs->ref();
  const std::vector<bool> padding = padding_rows(c.in, d);
  for (FuzzTensor* t : {&c.in.q, &c.dout}) t->set_sequence_rows(d.layout, padding, kPaddingGarbage);

  Verdict expected = inputs_verdict(p.in);
  if (expected.ok) expected = backward_tensors_verdict(p, expected.shape);
  if (expected.ok && p.in.q.device != Device::cpu)
    expected = Verdict{false, "a CPU-only build refuses CUDA tensors", {}};
  if (expected.ok) expected = metadata_verdict(p.in, expected.shape);
  test::ReferenceProblem problem{};
  test::ReferenceForward forward_outputs{};
  if (expected.ok) {
    problem = reference_problem(c.in, p.in, expected.shape);
    forward_outputs = write_forward_outputs(c, problem);
    // A padding row's out and lse may hold anything; NaN would show if read.
    c.out.set_sequence_rows(d.layout, padding, std::nan(""));
    for (std::int64_t row = 0; row < c.lse.numel(); ++row)
      if (padding[static_cast<std::size_t>(row % seq_q)]) c.lse.set(row, std::nan(""));
  }

  // Nothing the call reads may change; the gradients only when it succeeds.
  std::vector<const FuzzTensor*> read = {&c.in.q, &c.in.k, &c.in.v, &c.in.idx, &c.in.num, &c.in.vbs,
                                         &c.out,  &c.dout, &c.lse};
  if (c.in.q_vbs) read.push_back(&*c.in.q_vbs);
  std::vector<std::vector<unsigned char>> read_before;
  for (const FuzzTensor* t : read) read_before.push_back(t->bytes());
  const std::vector<std::vector<unsigned char>> grads_before = {c.dq.bytes(), c.dk.bytes(), c.dv.bytes()};
  const auto expect_inputs_unchanged = [&] {
    for (std::size_t i = 0; i < read_before.size(); ++i)
      if (read[i]->bytes() != read_before[i]) fail("backward wrote to a tensor it reads", std::to_string(i).c_str());
  };
  try {
    backward(p);
  } catch (const Error& e) {
    if (expected.ok) fail("backward refused a valid call", e.what());
    if (c.dq.bytes() != grads_before[0] || c.dk.bytes() != grads_before[1] || c.dv.bytes() != grads_before[2])
      fail("a failed backward wrote to its gradients", e.what());
    expect_inputs_unchanged();
    return;
  }
  if (!expected.ok) fail("backward ran a call the contract refuses", expected.broken.c_str());
  expect_inputs_unchanged();
  expect_matches_reference(c, problem, forward_outputs, grads_before);
}

}  // namespace vsa::fuzz
