#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "contract_oracle.hpp"
#include "fuzz_choices.hpp"
#include "fuzz_targets.hpp"
#include "fuzz_tensor.hpp"
#include "support/host_tensor.hpp"
#include "support/reference_attention.hpp"

namespace vsa::fuzz {
namespace {

// Extents the fuzzer picks: small, so the float64 reference stays quick.
struct Dims {
  std::int64_t batch, heads, kv_heads, num_q_blocks, num_kv_blocks, block, dim, max_kv;
  Layout layout;
};

Dims pick_dims(FuzzedDataProvider& in) {
  Dims d{};
  d.batch = in.ConsumeIntegralInRange<std::int64_t>(1, 2);
  d.kv_heads = in.ConsumeIntegralInRange<std::int64_t>(1, 2);
  d.heads = d.kv_heads * in.ConsumeIntegralInRange<std::int64_t>(1, 2);
  if (rarely(in)) d.heads = in.ConsumeIntegralInRange<std::int64_t>(1, 3);  // maybe no GQA group
  d.num_q_blocks = in.ConsumeIntegralInRange<std::int64_t>(1, 2);
  d.num_kv_blocks = in.ConsumeIntegralInRange<std::int64_t>(1, 3);
  d.block = rarely(in) ? in.PickValueInArray<std::int64_t>({32, 96, 192}) : in.PickValueInArray<std::int64_t>({64, 128});
  d.dim = rarely(in) ? in.PickValueInArray<std::int64_t>({32, 96, 1}) : in.PickValueInArray<std::int64_t>({64, 128});
  d.max_kv = in.ConsumeIntegralInRange<std::int64_t>(1, 4);
  d.layout = in.ConsumeBool() ? Layout::bshd : Layout::bhsd;
  return d;
}

// Sometimes one extent off a little: a shape the contract may refuse.
std::vector<std::int64_t> maybe_bent(FuzzedDataProvider& in, std::vector<std::int64_t> shape) {
  if (rarely(in)) {
    std::int64_t& e = shape[in.ConsumeIntegralInRange<std::size_t>(0, shape.size() - 1)];
    e = std::max<std::int64_t>(0, e + in.PickValueInArray<std::int64_t>({1, -1, 2, -64}));
  }
  return shape;
}

// A q/k/v/out-shaped tensor: outer axes stored in any order, rows padded,
// the sequence maybe stored backwards and (inputs only) the heads maybe
// broadcast from one (stride 0), as torch's expand() makes.
FuzzTensor sequence_tensor(FuzzedDataProvider& in, DType dtype, const Dims& d, std::int64_t heads,
                           std::int64_t seq, bool input) {
  const int seq_axis = d.layout == Layout::bhsd ? 2 : 1, head_axis = 3 - seq_axis;
  std::vector<std::int64_t> shape = d.layout == Layout::bhsd ? std::vector<std::int64_t>{d.batch, heads, seq, d.dim}
                                                             : std::vector<std::int64_t>{d.batch, seq, heads, d.dim};
  shape = maybe_bent(in, shape);
  static constexpr int kOrders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  const int* order = kOrders[in.ConsumeIntegralInRange<int>(0, 5)];  // outermost first
  std::vector<std::int64_t> strides(4);
  strides[3] = rarely(in) ? 2 : 1;
  std::int64_t step = shape[3] * strides[3] + in.PickValueInArray<std::int64_t>({0, 8, 3, 64});
  for (int i = 2; i >= 0; --i) {
    strides[order[i]] = step;
    step *= std::max<std::int64_t>(shape[order[i]], 1);
  }
  if (in.ConsumeIntegralInRange<int>(0, 3) == 3) strides[seq_axis] = -strides[seq_axis];
  if (input && rarely(in)) strides[head_axis] = 0;
  return FuzzTensor(dtype, shape, strides);
}

// Integer metadata: int32/int64 (rarely another dtype), rarely not contiguous.
FuzzTensor int_tensor(FuzzedDataProvider& in, std::vector<std::int64_t> shape) {
  const DType dtype = rarely(in) ? in.PickValueInArray({DType::f32, DType::bf16, DType::boolean})
                                 : in.PickValueInArray({DType::i32, DType::i64});
  shape = maybe_bent(in, shape);
  std::vector<std::int64_t> strides = packed_strides(shape);
  if (rarely(in))
    for (std::int64_t& s : strides) s *= 2;
  return FuzzTensor(dtype, shape, strides);
}

// Values past a row's count, which no backend may read: -1 and ids far out of range.
std::int64_t padding_garbage(FuzzedDataProvider& in, std::int64_t num_kv_blocks) {
  return in.PickValueInArray<std::int64_t>({-1, num_kv_blocks, num_kv_blocks + 1000,
                                            std::numeric_limits<std::int32_t>::max(),
                                            std::numeric_limits<std::int32_t>::min(),
                                            std::numeric_limits<std::int64_t>::max(), -7});
}

// Counts, listed ids (duplicates allowed) and padding; `hostile` lists break
// the value rules at the fuzzer's choice.
void fill_lists(FuzzedDataProvider& in, FuzzTensor& idx, FuzzTensor& num, const Dims& d) {
  const bool hostile = rarely(in);
  for (std::int64_t e = 0; e < idx.numel(); ++e) idx.set_int(e, padding_garbage(in, d.num_kv_blocks));
  const std::int64_t width = idx.shape()[3];
  for (std::int64_t row = 0; row < num.numel(); ++row) {
    const std::int64_t count = hostile ? in.ConsumeIntegralInRange<std::int64_t>(-2, d.max_kv + 2)
                                       : in.ConsumeIntegralInRange<std::int64_t>(0, d.max_kv);
    num.set_int(row, count);
    for (std::int64_t e = 0; e < std::min(count, width) && row * width + e < idx.numel(); ++e) {
      const std::int64_t id = hostile && rarely(in) ? in.ConsumeIntegralInRange<std::int64_t>(-3, d.num_kv_blocks + 3)
                                                    : in.ConsumeIntegralInRange<std::int64_t>(0, d.num_kv_blocks - 1);
      idx.set_int(row * width + e, id);
    }
  }
}

// Full, empty and partial blocks; hostile values outside [0, blk].
void fill_block_sizes(FuzzedDataProvider& in, FuzzTensor& vbs, const Dims& d) {
  const bool hostile = rarely(in);
  for (std::int64_t j = 0; j < vbs.numel(); ++j) {
    std::int64_t n = d.block;
    if (hostile)
      n = in.ConsumeIntegralInRange<std::int64_t>(-2, d.block + 2);
    else if (in.ConsumeBool())
      n = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<std::int64_t>(1, std::max<std::int64_t>(1, d.block - 1));
    vbs.set_int(j, n);
  }
}

// The six inputs and two outputs of one call.
struct Call {
  FuzzTensor q, k, v, idx, num, vbs, out, lse;
  ForwardParams params;
};

void expect_matches_reference(const Call& c, const ProblemShape& s,
                              const std::vector<unsigned char>& out_before,
                              const std::vector<unsigned char>& lse_before) {
  const ForwardParams& p = c.params;
  const test::ReferenceProblem problem{
      s.batch, s.heads, s.kv_heads, s.seq_q, s.seq_kv, s.head_dim, s.block, s.max_kv,
      p.in.scale != 0.0f ? p.in.scale : 1.0 / std::sqrt(static_cast<double>(s.head_dim)),
      c.q.bhsd_values(p.in.layout), c.k.bhsd_values(p.in.layout), c.v.bhsd_values(p.in.layout),
      c.idx.int_values(), c.num.int_values(), c.vbs.int_values(), {}};
  const test::ReferenceForward expected = test::reference_forward(problem);
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
  const double lse_error = test::relative_error(lse, lse_expected);
  if (!(lse_error <= tolerance)) fail("lse differs from the float64 reference", std::to_string(lse_error).c_str());

  if (!c.out.gaps_equal(out_before)) fail("forward wrote outside out's view", "");
  if (!p.need_lse && c.lse.bytes() != lse_before) fail("need_lse = false wrote lse", "");
}

}  // namespace

void fuzz_forward(FuzzedDataProvider& in) {
  const Dims d = pick_dims(in);
  DType dtype = in.PickValueInArray({DType::f32, DType::bf16, DType::f16});
  auto other_dtype = [&] { return rarely(in) ? in.PickValueInArray({DType::f32, DType::bf16, DType::f16, DType::i32}) : dtype; };
  const std::int64_t seq_q = d.num_q_blocks * d.block, seq_kv = d.num_kv_blocks * d.block;

  Call c;
  c.q = sequence_tensor(in, dtype, d, d.heads, seq_q, true);
  c.k = sequence_tensor(in, other_dtype(), d, d.kv_heads, seq_kv, true);
  c.v = sequence_tensor(in, other_dtype(), d, d.kv_heads, seq_kv, true);
  c.idx = int_tensor(in, {d.batch, d.heads, d.num_q_blocks, d.max_kv});
  c.num = int_tensor(in, {d.batch, d.heads, d.num_q_blocks});
  c.vbs = int_tensor(in, {d.num_kv_blocks});
  c.out = sequence_tensor(in, other_dtype(), d, d.heads, seq_q, false);
  c.lse = rarely(in) ? int_tensor(in, {d.batch, d.heads, seq_q}) : FuzzTensor(DType::f32, maybe_bent(in, {d.batch, d.heads, seq_q}));
  fill_lists(in, c.idx, c.num, d);
  fill_block_sizes(in, c.vbs, d);
  std::mt19937_64 rng(in.ConsumeIntegral<std::uint64_t>());
  for (FuzzTensor* t : {&c.q, &c.k, &c.v}) t->fill_random(rng);
  c.out.fill_bytes(0xff);  // NaN in every float dtype
  c.lse.fill_bytes(0xff);

  ForwardParams& p = c.params;
  p.in.q = c.q.ref();
  p.in.k = c.k.ref();
  p.in.v = c.v.ref();
  p.in.q2k_idx = c.idx.ref();
  p.in.q2k_num = c.num.ref();
  p.in.variable_block_sizes = c.vbs.ref();
  p.in.layout = d.layout;
  p.in.scale = any_scale(in);
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
