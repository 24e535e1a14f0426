#include <sanitizer/asan_interface.h>

#include <cstdint>
#include <string>

#include "contract_oracle.hpp"
#include "fuzz_choices.hpp"
#include "fuzz_targets.hpp"

namespace vsa::fuzz {
namespace {

// What every descriptor points at: memory AddressSanitizer poisons, so a
// check that reads tensor contents is reported as a bad read.
void* forbidden_memory() {
  alignas(64) static unsigned char bytes[256];
  static const bool poisoned = [] {
    ASAN_POISON_MEMORY_REGION(bytes, sizeof bytes);
    return true;
  }();
  (void)poisoned;
  return bytes;
}

TensorRef descriptor(DType dtype, std::initializer_list<std::int64_t> shape) {
  return TensorRef::contiguous(forbidden_memory(), dtype, shape);
}

// A valid-looking call: small extents, contiguous tensors, int metadata.
ForwardParams plausible_call(FuzzedDataProvider& in) {
  const std::int64_t b = in.ConsumeIntegralInRange<std::int64_t>(1, 2);
  const std::int64_t kv_heads = in.ConsumeIntegralInRange<std::int64_t>(1, 2);
  const std::int64_t heads = kv_heads * in.ConsumeIntegralInRange<std::int64_t>(1, 3);
  const std::int64_t nq = in.ConsumeIntegralInRange<std::int64_t>(1, 3);
  const std::int64_t nk = in.ConsumeIntegralInRange<std::int64_t>(1, 4);
  const std::int64_t blk = in.ConsumeBool() ? 128 : 64;
  const std::int64_t d = in.ConsumeBool() ? 128 : 64;
  const std::int64_t max_kv = in.ConsumeIntegralInRange<std::int64_t>(1, 5);
  const DType dtype = in.PickValueInArray({DType::f32, DType::bf16, DType::f16});
  const Layout layout = in.ConsumeBool() ? Layout::bshd : Layout::bhsd;
  auto seq = [&](std::int64_t h, std::int64_t s) {
    return layout == Layout::bhsd ? descriptor(dtype, {b, h, s, d}) : descriptor(dtype, {b, s, h, d});
  };
  ForwardParams p;
  p.in.q = seq(heads, nq * blk);
  p.in.k = seq(kv_heads, nk * blk);
  p.in.v = seq(kv_heads, nk * blk);
  const DType ints = in.ConsumeBool() ? DType::i64 : DType::i32;
  p.in.q2k_idx = descriptor(ints, {b, heads, nq, max_kv});
  p.in.q2k_num = descriptor(ints, {b, heads, nq});
  p.in.variable_block_sizes = descriptor(ints, {nk});
  p.in.layout = layout;
  p.in.scale = any_scale(in);
  p.out = seq(heads, nq * blk);
  p.lse = descriptor(DType::f32, {b, heads, nq * blk});
  p.need_lse = !in.ConsumeBool();
  return p;
}

// Overwrites one field of one of the eight tensors, the layout, or the
// batch extent of every tensor at once (huge batches stay consistent, so
// they reach the checks that multiply extents).
void mutate(FuzzedDataProvider& in, ForwardParams& p) {
  TensorRef* tensors[] = {&p.in.q,       &p.in.k,   &p.in.v, &p.in.q2k_idx, &p.in.q2k_num,
                          &p.in.variable_block_sizes, &p.out, &p.lse};
  if (rarely(in)) {
    const std::int64_t batch = edgy_int64(in);
    for (TensorRef* t : tensors)
      if (t != &p.in.variable_block_sizes) t->shape[0] = batch;
    return;
  }
  TensorRef& t = *in.PickValueInArray(tensors);
  const int axis = in.ConsumeIntegralInRange<int>(0, kMaxRank - 1);
  switch (in.ConsumeIntegralInRange<int>(0, 8)) {
    case 0: t.shape[axis] = edgy_int64(in); break;
    case 1: t.stride[axis] = edgy_int64(in); break;
    case 2:  // wraps instead of overflowing
      t.shape[axis] = static_cast<std::int64_t>(static_cast<std::uint64_t>(t.shape[axis]) +
                                                static_cast<std::uint64_t>(in.ConsumeIntegralInRange<int>(-2, 2)));
      break;
    case 3: t.dtype = any_dtype(in); break;
    case 4: t.rank = in.PickValueInArray({0, 1, 3, 4, 5, 8, 64, -1, -1000}); break;
    case 5: t.data = nullptr; break;
    case 6: t.device = in.ConsumeBool() ? Device::cuda : static_cast<Device>(in.ConsumeIntegral<std::uint8_t>()); break;
    case 7: t.device_index = in.PickValueInArray({1, -1, 63, 64, 1 << 30}); break;
    case 8: p.in.layout = static_cast<Layout>(in.ConsumeIntegral<std::uint8_t>()); break;
  }
}

}  // namespace

void fuzz_descriptors(FuzzedDataProvider& in) {
  ForwardParams p = plausible_call(in);
  for (int n = in.ConsumeIntegralInRange<int>(0, 4); n > 0; --n) mutate(in, p);

  const Verdict inputs = inputs_verdict(p.in);
  try {
    const ProblemShape s = check_inputs(p.in);
    if (!inputs.ok) fail("check_inputs accepted inputs that break a rule", inputs.broken.c_str());
    const ProblemShape& e = inputs.shape;
    if (s.batch != e.batch || s.heads != e.heads || s.kv_heads != e.kv_heads || s.seq_q != e.seq_q ||
        s.seq_kv != e.seq_kv || s.head_dim != e.head_dim || s.block != e.block ||
        s.num_q_blocks != e.num_q_blocks || s.num_kv_blocks != e.num_kv_blocks || s.max_kv != e.max_kv)
      fail("check_inputs returned a wrong problem shape", "");
  } catch (const Error& e) {
    if (inputs.ok) fail("check_inputs refused valid inputs", e.what());
  }

  // This build has no CUDA backend: only CPU tensors are supported.
  const bool on_cpu = p.in.q.device == Device::cpu;
  if (supported(p.in).ok != (inputs.ok && on_cpu)) fail("supported() disagrees with the contract", "");

  // A call refused on descriptors alone must fail before reading or writing
  // any tensor (all of them are poisoned).
  const bool refused = !inputs.ok || !outputs_verdict(p, inputs.shape).ok || !on_cpu;
  if (!refused) return;
  try {
    forward(p);
  } catch (const Error&) {
    return;
  }
  fail("forward ran a call the contract refuses", inputs.ok ? "outputs or device" : inputs.broken.c_str());
}

}  // namespace vsa::fuzz
