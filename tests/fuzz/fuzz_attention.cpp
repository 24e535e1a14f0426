#include "fuzz_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fuzz_choices.hpp"

namespace vsa::fuzz {
namespace {

// Values past a row's count, which no backend may read: -1 and ids far out of range.
std::int64_t padding_garbage(FuzzedDataProvider& in, std::int64_t num_kv_blocks) {
  return in.PickValueInArray<std::int64_t>({-1, num_kv_blocks, num_kv_blocks + 1000,
                                            std::numeric_limits<std::int32_t>::max(),
                                            std::numeric_limits<std::int32_t>::min(),
                                            std::numeric_limits<std::int64_t>::max(), -7});
}

// Counts, listed ids (duplicates allowed) and padding; `hostile` lists break
// the value rules at the fuzzer's choice. Once the bytes run out the counts
// are `counts_when_out`'s: 0, or max_kv (whole lists).
void fill_lists(FuzzedDataProvider& in, FuzzTensor& idx, FuzzTensor& num, const Dims& d, ListsWhenOut counts_when_out) {
  const bool hostile = rarely(in);
  for (std::int64_t e = 0; e < idx.numel(); ++e) idx.set_int(e, padding_garbage(in, d.num_kv_blocks));
  const std::int64_t width = idx.shape()[3];
  for (std::int64_t row = 0; row < num.numel(); ++row) {
    std::int64_t count = 0;
    if (hostile)
      count = in.ConsumeIntegralInRange<std::int64_t>(-2, d.max_kv + 2);
    else if (counts_when_out == ListsWhenOut::whole)
      count = d.max_kv - in.ConsumeIntegralInRange<std::int64_t>(0, d.max_kv);
    else
      count = in.ConsumeIntegralInRange<std::int64_t>(0, d.max_kv);
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

}  // namespace

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

std::vector<std::int64_t> maybe_bent(FuzzedDataProvider& in, std::vector<std::int64_t> shape) {
  if (rarely(in)) {
    std::int64_t& e = shape[in.ConsumeIntegralInRange<std::size_t>(0, shape.size() - 1)];
    e = std::max<std::int64_t>(0, e + in.PickValueInArray<std::int64_t>({1, -1, 2, -64}));
  }
  return shape;
}

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

FuzzTensor int_tensor(FuzzedDataProvider& in, std::vector<std::int64_t> shape) {
  const DType dtype = rarely(in) ? in.PickValueInArray({DType::f32, DType::bf16, DType::boolean})
                                 : in.PickValueInArray({DType::i32, DType::i64});
  shape = maybe_bent(in, shape);
  std::vector<std::int64_t> strides = packed_strides(shape);
  if (rarely(in))
    for (std::int64_t& s : strides) s *= 2;
  return FuzzTensor(dtype, shape, strides);
}

FuzzTensor lse_tensor(FuzzedDataProvider& in, const Dims& d) {
  const std::int64_t seq_q = d.num_q_blocks * d.block;
  return rarely(in) ? int_tensor(in, {d.batch, d.heads, seq_q})
                    : FuzzTensor(DType::f32, maybe_bent(in, {d.batch, d.heads, seq_q}));
}

DType maybe_other_dtype(FuzzedDataProvider& in, DType dtype) {
  return rarely(in) ? in.PickValueInArray({DType::f32, DType::bf16, DType::f16, DType::i32}) : dtype;
}

FuzzInputs input_tensors(FuzzedDataProvider& in, const Dims& d, DType dtype) {
  const std::int64_t seq_q = d.num_q_blocks * d.block, seq_kv = d.num_kv_blocks * d.block;
  FuzzInputs t;
  t.q = sequence_tensor(in, dtype, d, d.heads, seq_q, true);
  t.k = sequence_tensor(in, maybe_other_dtype(in, dtype), d, d.kv_heads, seq_kv, true);
  t.v = sequence_tensor(in, maybe_other_dtype(in, dtype), d, d.kv_heads, seq_kv, true);
  t.idx = int_tensor(in, {d.batch, d.heads, d.num_q_blocks, d.max_kv});
  t.num = int_tensor(in, {d.batch, d.heads, d.num_q_blocks});
  t.vbs = int_tensor(in, {d.num_kv_blocks});
  return t;
}

std::mt19937_64 fill_inputs(FuzzedDataProvider& in, FuzzInputs& t, const Dims& d, ListsWhenOut counts_when_out) {
  fill_lists(in, t.idx, t.num, d, counts_when_out);
  fill_block_sizes(in, t.vbs, d);
  std::mt19937_64 rng(in.ConsumeIntegral<std::uint64_t>());
  for (FuzzTensor* x : {&t.q, &t.k, &t.v}) x->fill_random(rng);
  return rng;
}

void add_query_sizes(FuzzedDataProvider& in, FuzzInputs& t, const Dims& d) {
  if (!in.ConsumeBool()) return;
  t.q_vbs = int_tensor(in, {d.num_q_blocks});
  fill_block_sizes(in, *t.q_vbs, d);
}

std::vector<bool> padding_rows(const FuzzInputs& t, const Dims& d) {
  std::vector<bool> rows(static_cast<std::size_t>(d.num_q_blocks * d.block));
  if (!t.q_vbs) return rows;
  const FuzzTensor& sizes = *t.q_vbs;
  const DType dtype = sizes.ref().dtype;
  if ((dtype != DType::i32 && dtype != DType::i64) || sizes.numel() != d.num_q_blocks) return rows;
  for (std::int64_t n = 0; n < d.num_q_blocks; ++n) {
    const std::int64_t real = sizes.get_int(n);
    if (real < 0 || real > d.block) return std::vector<bool>(rows.size());
    for (std::int64_t row = n * d.block + real; row < (n + 1) * d.block; ++row)
      rows[static_cast<std::size_t>(row)] = true;
  }
  return rows;
}

AttentionInputs attention_inputs(FuzzedDataProvider& in, const FuzzInputs& t, Layout layout) {
  AttentionInputs a;
  a.q = t.q.ref();
  a.k = t.k.ref();
  a.v = t.v.ref();
  a.q2k_idx = t.idx.ref();
  a.q2k_num = t.num.ref();
  a.variable_block_sizes = t.vbs.ref();
  a.layout = layout;
  a.scale = any_scale(in);
  return a;
}

test::ReferenceProblem reference_problem(const FuzzInputs& t, const AttentionInputs& in, const ProblemShape& s) {
  return test::ReferenceProblem{s.batch, s.heads, s.kv_heads, s.seq_q, s.seq_kv, s.head_dim, s.block, s.max_kv,
                                in.scale != 0.0f ? in.scale : 1.0 / std::sqrt(static_cast<double>(s.head_dim)),
                                t.q.bhsd_values(in.layout), t.k.bhsd_values(in.layout), t.v.bhsd_values(in.layout),
                                t.idx.int_values(), t.num.int_values(), t.vbs.int_values(),
                                t.q_vbs ? t.q_vbs->int_values() : std::vector<std::int64_t>{}};
}

}  // namespace vsa::fuzz
