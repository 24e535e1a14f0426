#include "core/check.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <utility>

#include "core/layout.hpp"

namespace vsa::detail {
namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

std::string join_dims(std::initializer_list<std::int64_t> dims) {
  std::string s = "[";
  bool first = true;
  for (std::int64_t d : dims) {
    s += (first ? "" : ", ") + str(d);
    first = false;
  }
  return s + "]";
}

bool is_float_dtype(DType d) { return d == DType::bf16 || d == DType::f16 || d == DType::f32; }

std::uint64_t magnitude(std::int64_t v) {  // |v|, without overflow at INT64_MIN
  return v < 0 ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
}

// The bytes of a non-empty tensor, as the set
//   { low + r + sum_i k_i * step_i : 0 <= r < run, 0 <= k_i < extent_i }
// of its innermost dense run (the axes whose stride equals the run so far)
// repeated along the outer axes.
struct Footprint {
  std::uint64_t low = 0, high = 0;  // its lowest and highest byte
  std::uint64_t run = 0;            // bytes of the innermost dense run
  std::uint64_t steps_gcd = 0;      // gcd of the outer axes' steps; 0 when the tensor is one run
  bool bounded = true;              // false: it spans more than 2^64 bytes, as no memory does
};

Footprint footprint(const TensorRef& t) {
  const std::uint64_t size = dtype_size(t.dtype);
  Footprint f;
  f.low = reinterpret_cast<std::uintptr_t>(t.data);
  std::uint64_t span = 0;  // from the first byte of the lowest element to that of the highest
  // (step, extent) of each axis that moves, first; the rest sort after them
  std::array<std::pair<std::uint64_t, std::uint64_t>, kMaxRank> moving;
  moving.fill({std::numeric_limits<std::uint64_t>::max(), 1});
  int count = 0;
  for (int a = 0; a < t.rank && a < kMaxRank; ++a) {
    if (t.shape[a] < 2 || t.stride[a] == 0) continue;  // reaches no other address
    const auto extent = static_cast<std::uint64_t>(t.shape[a]);
    std::uint64_t step = 0, reach = 0;
    if (__builtin_mul_overflow(magnitude(t.stride[a]), size, &step) ||
        __builtin_mul_overflow(step, extent - 1, &reach) || __builtin_add_overflow(span, reach, &span)) {
      f.bounded = false;
      return f;
    }
    if (t.stride[a] < 0) f.low -= reach;  // a negative stride reaches below data
    moving[count++] = {step, extent};
  }
  std::sort(moving.begin(), moving.end());
  f.run = size;
  int a = 0;
  for (; a < count && moving[a].first == f.run; ++a) f.run *= moving[a].second;  // at most span + size
  for (; a < count; ++a) f.steps_gcd = std::gcd(f.steps_gcd, moving[a].first);
  f.high = f.low + span + (size - 1);
  return f;
}

// Whether two tensors certainly share no byte: their address ranges do not
// meet; or, modulo the gcd g of both tensors' outer steps, every byte of each
// lies in the window its run starts at its lowest byte (when the run fits in
// g), and the two windows do not meet. Slices of one packed [.., 3, H, D]
// buffer are told apart this way.
bool apart(const Footprint& a, const Footprint& b) {
  if (a.high < b.low || b.high < a.low) return true;
  const std::uint64_t g = std::gcd(a.steps_gcd, b.steps_gcd);
  if (g == 0 || a.run > g || b.run > g) return false;
  const std::uint64_t a_to_b = (b.low % g + g - a.low % g) % g;  // where b's window starts, past a's start
  const std::uint64_t b_to_a = (a.low % g + g - b.low % g) % g;
  return a_to_b >= a.run && b_to_a >= b.run;
}

// A tensor of the call with its footprint, taken once for all its pairs; none for an undefined
// or empty tensor, which shares nothing.
struct Placed {
  const NamedTensor* named;
  Footprint footprint;
};
std::optional<Placed> placed(const NamedTensor& t) {
  if (!t.tensor.defined() || t.tensor.numel() == 0) return std::nullopt;
  return Placed{&t, footprint(t.tensor)};
}

// `w`, a tensor the call writes, against another tensor of the call.
void expect_apart(const Placed& w, const Placed& other) {
  const TensorRef &a = w.named->tensor, &b = other.named->tensor;
  if (a.device != b.device || a.device_index != b.device_index) return;
  const Footprint &fa = w.footprint, &fb = other.footprint;
  if (fa.bounded && fb.bounded && apart(fa, fb)) return;
  // One first byte, or two dense runs whose ranges meet: certainly shared.
  const bool certain = a.data == b.data || (fa.bounded && fb.bounded && fa.steps_gcd == 0 && fb.steps_gcd == 0);
  fail(w.named->name, "memory shared with no other tensor of the call",
       std::string(certain ? "shares memory" : "may share memory (interleaved address ranges not shown disjoint)") +
           " with " + other.named->name);
}

}  // namespace

void expect_unshared(std::initializer_list<NamedTensor> written, const std::vector<NamedTensor>& read) {
  std::vector<Placed> writes, reads;
  for (const NamedTensor& t : written)
    if (auto p = placed(t)) writes.push_back(*p);
  for (const NamedTensor& t : read)
    if (auto p = placed(t)) reads.push_back(*p);
  for (auto w = writes.begin(); w != writes.end(); ++w) {
    for (auto other = std::next(w); other != writes.end(); ++other) expect_apart(*w, *other);
    for (const Placed& r : reads) expect_apart(*w, r);
  }
}

TensorRef unless_same_view(const TensorRef& input, const TensorRef& output) {
  bool same = input.data == output.data && input.device == output.device &&
              input.device_index == output.device_index && input.dtype == output.dtype && input.rank == output.rank;
  for (int a = 0; same && a < input.rank && a < kMaxRank; ++a)
    same = input.shape[a] == output.shape[a] && input.stride[a] == output.stride[a];
  return same ? TensorRef{} : input;
}

std::vector<NamedTensor> attention_inputs(const AttentionInputs& in) {
  return {{in.q, "q"},
          {in.k, "k"},
          {in.v, "v"},
          {in.q2k_idx, "q2k_idx"},
          {in.q2k_num, "q2k_num"},
          {in.variable_block_sizes, "variable_block_sizes"},
          {in.q_variable_block_sizes, "q_variable_block_sizes"}};
}

TensorRef workspace_tensor(void* data, std::size_t bytes, const TensorRef& like) {
  if (like.device == Device::cpu) return {};
  const auto count = static_cast<std::int64_t>(std::min<std::size_t>(bytes, std::numeric_limits<std::int64_t>::max()));
  return TensorRef::contiguous(data, DType::boolean, {count}, like.device, like.device_index);
}

// q/k/v-shaped tensors: rank 4, a float dtype, unit stride on D.
void expect_sequence_tensor(const TensorRef& t, const char* name) {
  expect_defined(t, name);
  expect_rank(t, name, 4);
  expect_addressable(t, name);
  if (!is_float_dtype(t.dtype))
    fail_unsupported(std::string(name) + ".dtype", "bfloat16, float16 or float32",
                     dtype_name(t.dtype));
  // An empty tensor's strides say nothing (numpy gives them 0): its extents are refused later.
  if (t.stride[3] != 1 && t.shape[3] != 1 && t.numel() > 0)
    fail(std::string(name) + ".stride", "unit stride on the head dimension (last axis)",
         "stride " + str(t.stride[3]));
}

void expect_dtype(const TensorRef& t, const char* name, DType dtype) {
  if (t.dtype != dtype) fail(std::string(name) + ".dtype", dtype_name(dtype), dtype_name(t.dtype));
}

// An output shaped and typed like `like` (q or k) on the same device.
void expect_like(const TensorRef& t, const char* name, const TensorRef& like, const char* like_name) {
  expect_sequence_tensor(t, name);
  expect_same_device(t, name, like);
  if (t.dtype != like.dtype)
    fail(std::string(name) + ".dtype", std::string(dtype_name(like.dtype)) + " (as " + like_name + ")",
         dtype_name(t.dtype));
  expect_shape(t, name, like);
}

// A written sequence tensor whose rows (or elements) certainly overlap: an outer axis (B, H or S)
// of extent above 1 with a stride under D in magnitude (0 included: a broadcast), or two such
// axes with one stride. Its rows would be written by racing threads, each the last to write
// some of them. A view whose rows interleave without touching is not refused; nor, in
// principle, is one that overlaps only in a subtler way (an exact test is a subset-sum problem).
void expect_distinct_rows(const TensorRef& t, const char* name) {
  const auto row = static_cast<std::uint64_t>(t.shape[3]);
  if (t.numel() == 0) return;  // its strides say nothing; its extents are refused elsewhere
  for (int a = 0; a < 3; ++a) {
    if (t.shape[a] < 2) continue;
    bool shared = magnitude(t.stride[a]) < row;
    for (int b = 0; b < a && !shared; ++b)
      shared = t.shape[b] > 1 && magnitude(t.stride[b]) == magnitude(t.stride[a]);
    if (shared)
      fail(std::string(name) + ".stride",
           "rows that do not overlap, as a written tensor's must (outer strides distinct and at least D = " +
               str(t.shape[3]) + " in magnitude, where the extent is above 1)",
           "strides [" + str(t.stride[0]) + ", " + str(t.stride[1]) + ", " + str(t.stride[2]) + ", " +
               str(t.stride[3]) + "] over " + t.shape_string());
  }
}

void expect_scale(float scale) {
  // The kernels take the scores in base 2, scale · log2(e) in float: past FLT_MAX / log2(e)
  // (~2.36e38) that is inf, and every row with a key came out NaN.
  constexpr float kLog2e = 1.4426950408889634f;
  if (!std::isfinite(scale) || scale < 0.0f || !std::isfinite(scale * kLog2e))
    fail("scale", "a finite positive number at most FLT_MAX / log2(e) = 2.3588e38 (0 selects 1/sqrt(D))",
         std::to_string(scale));
}

void expect_output_like(const TensorRef& t, const char* name, const TensorRef& like, const char* like_name) {
  expect_like(t, name, like, like_name);
  expect_distinct_rows(t, name);
}

namespace {

void expect_lse(const TensorRef& t, const char* name, const TensorRef& q, const ProblemShape& s) {
  expect_defined(t, name);
  expect_same_device(t, name, q);
  expect_dtype(t, name, DType::f32);
  expect_shape(t, name, {s.batch, s.heads, s.seq_q});
  expect_contiguous(t, name);
}

}  // namespace

void fail(const std::string& argument, const std::string& expected, const std::string& got) {
  throw Error(ErrorKind::invalid_argument, argument, expected, got);
}

void fail_unsupported(const std::string& argument, const std::string& expected,
                      const std::string& got) {
  throw Error(ErrorKind::unsupported, argument, expected, got);
}

void expect_defined(const TensorRef& t, const char* name) {
  if (t.data != nullptr) return;
  // DLPack (torch) gives a tensor with no elements a null pointer: the
  // problem is its extents, not a missing tensor.
  if (t.rank > 0 && t.numel() == 0) fail(std::string(name) + ".shape", "non-zero extents", t.shape_string());
  fail(name, "a non-null data pointer", "null");
}

void expect_rank(const TensorRef& t, const char* name, int rank) {
  if (t.rank != rank)
    fail(name, "rank " + str(rank), "rank " + str(t.rank) + " " + t.shape_string());
}

void expect_int_dtype(const TensorRef& t, const char* name) {
  if (t.dtype != DType::i32 && t.dtype != DType::i64)
    fail(std::string(name) + ".dtype", "int32 or int64", dtype_name(t.dtype));
}

void expect_addressable(const TensorRef& t, const char* name) {
  const std::int64_t count = t.numel();
  const auto size = static_cast<std::int64_t>(dtype_size(t.dtype) > 0 ? dtype_size(t.dtype) : 1);
  if (count < 0 || count > std::numeric_limits<std::int64_t>::max() / size)
    fail(std::string(name) + ".shape", "extents >= 0 whose bytes fit in int64", t.shape_string());
}

void expect_int32_holds(const TensorRef& out, const char* name, std::int64_t largest, const std::string& why) {
  if (out.dtype == DType::i32 && largest >= kInt32Ids)
    fail(std::string(name) + ".dtype", "int64 for values up to " + str(largest) + " (" + why + ")", "int32");
}

void expect_contiguous(const TensorRef& t, const char* name) {
  if (!t.is_contiguous()) fail(std::string(name) + ".stride", "a contiguous tensor", "strided");
}

void expect_same_device(const TensorRef& t, const char* name, const TensorRef& ref,
                        const char* ref_name) {
  if (t.device != ref.device || t.device_index != ref.device_index)
    fail(std::string(name) + ".device",
         std::string(device_name(ref.device)) + ":" + str(ref.device_index) + " (as " + ref_name + ")",
         std::string(device_name(t.device)) + ":" + str(t.device_index));
}

void expect_shape(const TensorRef& t, const char* name, const TensorRef& like) {
  bool same = t.rank == like.rank;
  for (int i = 0; same && i < t.rank; ++i) same = t.shape[i] == like.shape[i];
  if (!same) fail(std::string(name) + ".shape", like.shape_string(), t.shape_string());
}

void expect_shape(const TensorRef& t, const char* name, std::initializer_list<std::int64_t> dims) {
  bool same = t.rank == static_cast<int>(dims.size());
  int i = 0;
  for (std::int64_t d : dims) {
    if (!same) break;
    same = t.shape[i++] == d;
  }
  if (!same) fail(std::string(name) + ".shape", join_dims(dims), t.shape_string());
}

}  // namespace vsa::detail

namespace vsa {

ProblemShape check_inputs(const AttentionInputs& in) {
  using namespace detail;
  if (in.layout != Layout::bhsd && in.layout != Layout::bshd)
    fail("layout", "bhsd or bshd", "value " + str(static_cast<int>(in.layout)));
  expect_sequence_tensor(in.q, "q");
  expect_sequence_tensor(in.k, "k");
  expect_sequence_tensor(in.v, "v");
  expect_same_device(in.k, "k", in.q);
  expect_same_device(in.v, "v", in.q);
  if (in.k.dtype != in.q.dtype)
    fail("k.dtype", std::string(dtype_name(in.q.dtype)) + " (as q)", dtype_name(in.k.dtype));
  if (in.v.dtype != in.q.dtype)
    fail("v.dtype", std::string(dtype_name(in.q.dtype)) + " (as q)", dtype_name(in.v.dtype));
  expect_shape(in.v, "v", in.k);

  const HeadView q = head_view(in.q, in.layout);
  const HeadView k = head_view(in.k, in.layout);
  ProblemShape s{};
  s.batch = q.batch;
  s.heads = q.heads;
  s.seq_q = q.seq;
  s.head_dim = q.dim;
  s.kv_heads = k.heads;
  s.seq_kv = k.seq;
  if (s.head_dim != 64 && s.head_dim != 128)
    fail_unsupported("q.shape", "head dim D of 64 or 128", "D = " + str(s.head_dim));
  if (k.dim != s.head_dim)
    fail("k.shape", "head dim " + str(s.head_dim) + " (as q)", "D = " + str(k.dim));
  if (k.batch != s.batch) fail("k.shape", "batch " + str(s.batch) + " (as q)", "batch " + str(k.batch));
  if (s.batch < 1 || s.heads < 1 || s.kv_heads < 1 || s.seq_q < 1 || s.seq_kv < 1)
    fail("q.shape", "non-empty batch, head and sequence extents",
         in.q.shape_string() + " and k " + in.k.shape_string());
  if (s.heads % s.kv_heads != 0)
    fail("k.shape", "kv heads dividing the " + str(s.heads) + " query heads (GQA)",
         str(s.kv_heads) + " kv heads");

  const TensorRef& vbs = in.variable_block_sizes;
  expect_defined(vbs, "variable_block_sizes");
  expect_same_device(vbs, "variable_block_sizes", in.q);
  expect_rank(vbs, "variable_block_sizes", 1);
  expect_addressable(vbs, "variable_block_sizes");
  expect_int_dtype(vbs, "variable_block_sizes");
  expect_contiguous(vbs, "variable_block_sizes");
  s.num_kv_blocks = vbs.shape[0];
  if (s.num_kv_blocks < 1 || s.seq_kv % s.num_kv_blocks != 0)
    fail("variable_block_sizes.shape", "NK dividing Skv = " + str(s.seq_kv) + " (one entry per KV block)",
         "NK = " + str(s.num_kv_blocks));
  s.block = s.seq_kv / s.num_kv_blocks;
  if (s.block != 64 && s.block != 128)
    fail_unsupported("variable_block_sizes.shape", "a block size Skv / NK of 64 or 128",
                     "Skv / NK = " + str(s.seq_kv) + " / " + str(s.num_kv_blocks) + " = " +
                         str(s.block));
  if (s.seq_q % s.block != 0)
    fail("q.shape", "Sq a multiple of the block size " + str(s.block), "Sq = " + str(s.seq_q));
  s.num_q_blocks = s.seq_q / s.block;

  const TensorRef& q_vbs = in.q_variable_block_sizes;
  if (q_vbs.defined()) {
    expect_same_device(q_vbs, "q_variable_block_sizes", in.q);
    expect_rank(q_vbs, "q_variable_block_sizes", 1);
    expect_addressable(q_vbs, "q_variable_block_sizes");
    expect_int_dtype(q_vbs, "q_variable_block_sizes");
    expect_shape(q_vbs, "q_variable_block_sizes", {s.num_q_blocks});
    expect_contiguous(q_vbs, "q_variable_block_sizes");
  }

  const TensorRef& idx = in.q2k_idx;
  expect_defined(idx, "q2k_idx");
  expect_same_device(idx, "q2k_idx", in.q);
  expect_rank(idx, "q2k_idx", 4);
  expect_addressable(idx, "q2k_idx");
  expect_int_dtype(idx, "q2k_idx");
  s.max_kv = idx.shape[3];
  if (s.max_kv < 1) fail("q2k_idx.shape", "max_kv >= 1 (last axis)", "max_kv = " + str(s.max_kv));
  expect_shape(idx, "q2k_idx", {s.batch, s.heads, s.num_q_blocks, s.max_kv});
  expect_contiguous(idx, "q2k_idx");

  const TensorRef& num = in.q2k_num;
  expect_defined(num, "q2k_num");
  expect_same_device(num, "q2k_num", in.q);
  expect_rank(num, "q2k_num", 3);
  expect_addressable(num, "q2k_num");
  expect_int_dtype(num, "q2k_num");
  expect_shape(num, "q2k_num", {s.batch, s.heads, s.num_q_blocks});
  expect_contiguous(num, "q2k_num");

  expect_scale(in.scale);
  return s;
}

}  // namespace vsa

namespace vsa::detail {

float resolved_scale(const AttentionInputs& in, const ProblemShape& s) {
  return in.scale != 0.0f ? in.scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim));
}

void check_forward_outputs(const ForwardParams& p, const ProblemShape& s) {
  expect_output_like(p.out, "out", p.in.q, "q");
  if (p.need_lse) expect_lse(p.lse, "lse", p.in.q, s);
  if (!p.coarse.defined()) {
    if (p.gate.defined()) fail("gate", "undefined when coarse is (the gate weights coarse)", "a tensor");
    if (p.fine.defined()) fail("fine", "undefined when coarse is (without the combine, out is the attention)",
                               "a tensor");
  } else {
    expect_rank(p.coarse, "coarse", 4);
    expect_same_device(p.coarse, "coarse", p.in.q);
    expect_dtype(p.coarse, "coarse", DType::f32);
    expect_shape(p.coarse, "coarse", {s.batch, s.heads, s.num_q_blocks, s.head_dim});
    expect_contiguous(p.coarse, "coarse");
    if (p.gate.defined()) expect_like(p.gate, "gate", p.in.q, "q");
    if (p.fine.defined()) expect_output_like(p.fine, "fine", p.in.q, "q");
  }
  std::vector<NamedTensor> read = attention_inputs(p.in);
  read.insert(read.end(), {{p.coarse, "coarse"}, {p.gate, "gate"}});
  expect_unshared({{p.out, "out"}, {p.need_lse ? p.lse : TensorRef{}, "lse"}, {p.fine, "fine"}}, read);
}

void check_backward_tensors(const BackwardParams& p, const ProblemShape& s) {
  expect_like(p.out, "out", p.in.q, "q");
  expect_like(p.dout, "dout", p.in.q, "q");
  expect_lse(p.lse, "lse", p.in.q, s);
  expect_output_like(p.dq, "dq", p.in.q, "q");
  expect_output_like(p.dk, "dk", p.in.k, "k");
  expect_output_like(p.dv, "dv", p.in.k, "k");
  const auto expect_mean_grad = [&](const TensorRef& t, const char* name, std::int64_t heads, std::int64_t blocks) {
    if (!t.defined()) return;
    expect_rank(t, name, 4);
    expect_same_device(t, name, p.in.q);
    expect_dtype(t, name, DType::f32);
    expect_shape(t, name, {s.batch, heads, blocks, s.head_dim});
    expect_contiguous(t, name);
  };
  expect_mean_grad(p.dq_mean, "dq_mean", s.heads, s.num_q_blocks);
  expect_mean_grad(p.dk_mean, "dk_mean", s.kv_heads, s.num_kv_blocks);
  expect_mean_grad(p.dv_mean, "dv_mean", s.kv_heads, s.num_kv_blocks);
  std::vector<NamedTensor> read = attention_inputs(p.in);
  read.insert(read.end(), {{p.out, "out"},
                           {p.lse, "lse"},
                           {p.dout, "dout"},
                           {p.dq_mean, "dq_mean"},
                           {p.dk_mean, "dk_mean"},
                           {p.dv_mean, "dv_mean"}});
  expect_unshared({{p.dq, "dq"},
                   {p.dk, "dk"},
                   {p.dv, "dv"},
                   {workspace_tensor(p.workspace, p.workspace_bytes, p.in.q), "workspace"}},
                  read);
}

void check_block_list_values(const TensorRef& idx, const char* idx_name, const TensorRef& num,
                             const char* num_name, std::int64_t num_kv_blocks) {
  const std::int64_t rows = num.numel();
  const std::int64_t max_kv = idx.shape[idx.rank - 1];
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t count = load_int(num, r);
    if (count < 0 || count > max_kv)
      fail(num_name, "counts in [0, max_kv = " + str(max_kv) + "]",
           str(count) + " at flat row " + str(r));
    for (std::int64_t e = 0; e < count; ++e) {
      const std::int64_t j = load_int(idx, r * max_kv + e);
      if (j < 0 || j >= num_kv_blocks)
        fail(idx_name, "block ids in [0, NK = " + str(num_kv_blocks) + ") before the count",
             str(j) + " at flat row " + str(r) + ", entry " + str(e));
    }
  }
}

void check_metadata_values(const AttentionInputs& in, const ProblemShape& s) {
  check_block_list_values(in.q2k_idx, "q2k_idx", in.q2k_num, "q2k_num", s.num_kv_blocks);
  for (std::int64_t j = 0; j < s.num_kv_blocks; ++j) {
    const std::int64_t n = load_int(in.variable_block_sizes, j);
    if (n < 0 || n > s.block)
      fail("variable_block_sizes", "values in [0, blk = " + str(s.block) + "]",
           str(n) + " at block " + str(j));
  }
  if (!in.q_variable_block_sizes.defined()) return;
  for (std::int64_t i = 0; i < s.num_q_blocks; ++i) {
    const std::int64_t n = load_int(in.q_variable_block_sizes, i);
    if (n < 0 || n > s.block)
      fail("q_variable_block_sizes", "values in [0, blk = " + str(s.block) + "]",
           str(n) + " at query block " + str(i));
  }
}

}  // namespace vsa::detail
