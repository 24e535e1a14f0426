#include <algorithm>
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

// The six inputs and two outputs of one call.
struct Call {
  FuzzInputs in;
  FuzzTensor out, lse;
  ForwardParams params;
};

void expect_matches_reference(const Call& c, const ProblemShape& s,
                              const std::vector<unsigned char>& out_before,
                              const std::vector<unsigned char>& lse_before) {
  const ForwardParams& p = c.params;
  const test::ReferenceForward expected = test::reference_forward(reference_problem(c.in, p.in, s));
  const std::vector<double> out = c.out.bhsd_values(p.in.layout);
  const double tolerance = p.in.q.dtype == DType::f32 ? 1e-5 : 1e-2;

  for (double x : out)
    if (!std::isfinite(x)) fail("forward wrote a value that is not finite", "out");
  const double out_error = test::relative_error(out, expected.out);
  if (!(out_error <= tolerance)) fail("out differs from the float64 reference", std::to_string(out_error).c_str());

  std::vector<double> lse, lse_expected;
  const auto dim = static_cast<std::size_t>(s.head_dim);
  for (std::size_t row = 0; row < expected.empty_row.size(); ++row) {
    const double got = p.need_lse ? c.lse.get(static_cast<std::int64_t>(row)) : 0.0;
    if (expected.empty_row[row]) {
      for (std::size_t x = 0; x < dim; ++x)
        if (out[row * dim + x] != 0.0) fail("a row with nothing to attend is not zero", "out");
      if (p.need_lse && got != kEmptyRowLse) fail("an empty row's lse is not the sentinel", "lse");
    } else if (p.need_lse) {
      if (!std::isfinite(got)) fail("forward wrote a value that is not finite", "lse");
      lse.push_back(got);
      lse_expected.push_back(expected.lse[row]);
    }
  }
  // lse is float32 whatever the inputs' dtype, from the inputs as they are: 16-bit calls are held
  // to 1e-4 too, as the C++ suite holds them (out's 1e-2 let a 0.5 % error pass).
  const double lse_error = test::relative_error(lse, lse_expected);
  if (!(lse_error <= std::min(tolerance, 1e-4)))
    fail("lse differs from the float64 reference", std::to_string(lse_error).c_str());

  if (!c.out.gaps_equal(out_before)) fail("forward wrote outside out's view", "");
  if (!p.need_lse && c.lse.bytes() != lse_before) fail("need_lse = false wrote lse", "");
}

}  // namespace

void fuzz_forward(FuzzedDataProvider& in) {
  const Dims d = pick_dims(in);
  const DType dtype = in.PickValueInArray({DType::f32, DType::bf16, DType::f16});
  const std::int64_t seq_q = d.num_q_blocks * d.block;

  Call c;
  c.in = input_tensors(in, d, dtype);
  c.out = sequence_tensor(in, maybe_other_dtype(in, dtype), d, d.heads, seq_q, false);
  c.lse = lse_tensor(in, d);
  fill_inputs(in, c.in, d, ListsWhenOut::empty);
  c.out.fill_bytes(0xff);  // NaN in every float dtype
  c.lse.fill_bytes(0xff);

  ForwardParams& p = c.params;
  p.in = attention_inputs(in, c.in, d.layout);
  p.out = c.out.ref();
  p.need_lse = !in.ConsumeBool();
  p.lse = c.lse.ref(!rarely(in));
  if (rarely(in)) {  // one tensor missing, or all on a device this build cannot run
    TensorRef* tensors[] = {&p.in.q, &p.in.k, &p.in.v, &p.in.q2k_idx, &p.in.q2k_num,
                            &p.in.variable_block_sizes, &p.out};
    if (in.ConsumeBool())
      in.PickValueInArray(tensors)->data = nullptr;
    else
      for (TensorRef* t : tensors) t->device = p.lse.device = Device::cuda;
  }
  // Drawn last, so the committed corpus (found before it) reads as it did.
  add_query_sizes(in, c.in, d);
  if (c.in.q_vbs) p.in.q_variable_block_sizes = c.in.q_vbs->ref();
  c.in.q.set_sequence_rows(d.layout, padding_rows(c.in, d), kPaddingGarbage);

  Verdict expected = inputs_verdict(p.in);
  try {
    check_inputs(p.in);
    if (!expected.ok) fail("check_inputs accepted inputs that break a rule", expected.broken.c_str());
  } catch (const Error& e) {
    if (expected.ok) fail("check_inputs refused valid inputs", e.what());
  }
  if (expected.ok) expected = outputs_verdict(p, expected.shape);
  if (expected.ok && p.in.q.device != Device::cpu) expected = Verdict{false, "a CPU-only build refuses CUDA tensors", {}};
  if (expected.ok) expected = metadata_verdict(p.in, expected.shape);

  const std::vector<unsigned char> out_before = c.out.bytes(), lse_before = c.lse.bytes();
  try {
    forward(p);
  } catch (const Error& e) {
    if (expected.ok) fail("forward refused a valid call", e.what());
    if (c.out.bytes() != out_before || c.lse.bytes() != lse_before) fail("a failed forward wrote to its outputs", e.what());
    return;
  }
  if (!expected.ok) fail("forward ran a call the contract refuses", expected.broken.c_str());
  expect_matches_reference(c, expected.shape, out_before, lse_before);
}

}  // namespace vsa::fuzz
