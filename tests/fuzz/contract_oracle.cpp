#include "contract_oracle.hpp"

#include <cmath>

namespace vsa::fuzz {
namespace {

__extension__ typedef __int128 Int;  // wide enough for the product of two int64 extents

Verdict broken(std::string rule) { return Verdict{false, std::move(rule), {}}; }

bool is_float(DType d) { return d == DType::bf16 || d == DType::f16 || d == DType::f32; }
bool is_int(DType d) { return d == DType::i32 || d == DType::i64; }
bool same_device(const TensorRef& a, const TensorRef& b) {
  return a.device == b.device && a.device_index == b.device_index;
}

// Row-major: every axis of extent other than 1 steps over the later axes.
// A step past the int64 range is held at 2^64, which no stride equals.
bool contiguous(const TensorRef& t) {
  const Int beyond = Int(1) << 64;
  Int step = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.stride[i] != step) return false;
    step *= t.shape[i];
    if (step > beyond || step < -beyond) step = beyond;
  }
  return true;
}

// A tensor a call writes: no outer axis of extent above 1 steps less than a row's D elements
// (a step of 0 included), and no two such axes step the same distance either way. Either would
// put two rows on one place. Empty tensors pass: their extents are what is wrong.
bool rows_apart(const TensorRef& t) {
  for (int i = 0; i < t.rank; ++i)
    if (t.shape[i] == 0) return true;
  const auto distance = [](std::int64_t stride) { return stride < 0 ? -Int(stride) : Int(stride); };
  for (int a = 0; a < 3; ++a) {
    if (t.shape[a] < 2) continue;
    if (distance(t.stride[a]) < t.shape[3]) return false;
    for (int b = a + 1; b < 3; ++b)
      if (t.shape[b] > 1 && distance(t.stride[b]) == distance(t.stride[a])) return false;
  }
  return true;
}

// Extents >= 0 and a byte count below 2^63 (rank already checked).
bool addressable(const TensorRef& t) {
  const Int limit = Int(1) << 63;
  Int bytes = dtype_size(t.dtype) > 0 ? dtype_size(t.dtype) : 1;
  bool empty = false;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] < 0) return false;
    empty = empty || t.shape[i] == 0;
  }
  for (int i = 0; i < t.rank && !empty; ++i) {
    bytes *= t.shape[i];
    if (bytes >= limit) return false;
  }
  return true;
}

// A q/k/v/out-shaped tensor on its own: present, rank 4, addressable, a
// float dtype, unit stride on D (any stride when D has one element).
bool sequence_tensor(const TensorRef& t) {
  return t.data != nullptr && t.rank == 4 && addressable(t) && is_float(t.dtype) &&
         (t.stride[3] == 1 || t.shape[3] == 1);
}

// An int32/int64 contiguous tensor of `rank` on q's device.
bool int_tensor(const TensorRef& t, int rank, const TensorRef& q) {
  return t.data != nullptr && t.rank == rank && addressable(t) && is_int(t.dtype) && same_device(t, q) &&
         contiguous(t);
}

bool shape_is(const TensorRef& t, std::initializer_list<std::int64_t> dims) {
  if (t.rank != static_cast<int>(dims.size())) return false;
  int i = 0;
  for (std::int64_t d : dims)
    if (t.shape[i++] != d) return false;
  return true;
}

// A sequence tensor of `model`'s shape, dtype and device.
bool like(const TensorRef& t, const TensorRef& model) {
  if (!sequence_tensor(t) || !same_device(t, model) || t.dtype != model.dtype) return false;
  for (int i = 0; i < 4; ++i)
    if (t.shape[i] != model.shape[i]) return false;
  return true;
}

// The forward's lse: float32 [B, H, Sq], contiguous, on q's device.
bool lse_tensor(const TensorRef& lse, const TensorRef& q, const ProblemShape& s) {
  return lse.data != nullptr && same_device(lse, q) && lse.dtype == DType::f32 &&
         shape_is(lse, {s.batch, s.heads, s.seq_q}) && contiguous(lse);
}

}  // namespace

Verdict inputs_verdict(const AttentionInputs& in) {
  if (in.layout != Layout::bhsd && in.layout != Layout::bshd) return broken("layout is bhsd or bshd");
  const TensorRef &q = in.q, &k = in.k, &v = in.v;
  if (!sequence_tensor(q) || !sequence_tensor(k) || !sequence_tensor(v))
    return broken("q, k, v: present, rank 4, float dtype, unit stride on D");
  if (!same_device(k, q) || !same_device(v, q)) return broken("k, v on q's device");
  if (k.dtype != q.dtype || v.dtype != q.dtype) return broken("k, v of q's dtype");
  for (int i = 0; i < 4; ++i)
    if (v.shape[i] != k.shape[i]) return broken("v shaped as k");

  const int seq_axis = in.layout == Layout::bshd ? 1 : 2, head_axis = 3 - seq_axis;
  ProblemShape s{};
  s.batch = q.shape[0];
  s.heads = q.shape[head_axis];
  s.seq_q = q.shape[seq_axis];
  s.head_dim = q.shape[3];
  s.kv_heads = k.shape[head_axis];
  s.seq_kv = k.shape[seq_axis];
  if (s.head_dim != 64 && s.head_dim != 128) return broken("D is 64 or 128");
  if (k.shape[3] != s.head_dim || k.shape[0] != s.batch) return broken("k has q's D and batch");
  if (s.batch < 1 || s.heads < 1 || s.kv_heads < 1 || s.seq_q < 1 || s.seq_kv < 1)
    return broken("batch, heads, sequences non-empty");
  if (s.heads % s.kv_heads != 0) return broken("kv heads divide the query heads");

  const TensorRef& vbs = in.variable_block_sizes;
  if (!int_tensor(vbs, 1, q)) return broken("variable_block_sizes: int, rank 1, contiguous, on q's device");
  s.num_kv_blocks = vbs.shape[0];
  if (s.num_kv_blocks < 1 || s.seq_kv % s.num_kv_blocks != 0) return broken("NK divides Skv");
  s.block = s.seq_kv / s.num_kv_blocks;
  if (s.block != 64 && s.block != 128) return broken("blk = Skv / NK is 64 or 128");
  if (s.seq_q % s.block != 0) return broken("Sq is whole blocks");
  s.num_q_blocks = s.seq_q / s.block;

  if (!int_tensor(in.q2k_idx, 4, q)) return broken("q2k_idx: int, rank 4, contiguous, on q's device");
  s.max_kv = in.q2k_idx.shape[3];
  if (s.max_kv < 1 || !shape_is(in.q2k_idx, {s.batch, s.heads, s.num_q_blocks, s.max_kv}))
    return broken("q2k_idx is [B, H, NQ, max_kv >= 1]");
  if (!int_tensor(in.q2k_num, 3, q) || !shape_is(in.q2k_num, {s.batch, s.heads, s.num_q_blocks}))
    return broken("q2k_num: int [B, H, NQ], contiguous, on q's device");
  const TensorRef& q_vbs = in.q_variable_block_sizes;
  if (q_vbs.defined() && (!int_tensor(q_vbs, 1, q) || !shape_is(q_vbs, {s.num_q_blocks})))
    return broken("q_variable_block_sizes, when given: int [NQ], contiguous, on q's device");
  if (!std::isfinite(in.scale) || in.scale < 0.0f) return broken("scale finite and >= 0");
  return Verdict{true, "", s};
}

Verdict outputs_verdict(const ForwardParams& p, const ProblemShape& s) {
  if (!like(p.out, p.in.q)) return broken("out: present, rank 4, shaped, typed and placed as q, unit stride on D");
  if (!rows_apart(p.out)) return broken("out: rows that do not overlap");
  if (p.need_lse && !lse_tensor(p.lse, p.in.q, s))
    return broken("lse: float32 [B, H, Sq], contiguous, on q's device");
  return Verdict{true, "", s};
}

Verdict backward_tensors_verdict(const BackwardParams& p, const ProblemShape& s) {
  const TensorRef &q = p.in.q, &k = p.in.k;
  if (!like(p.out, q) || !like(p.dout, q))
    return broken("out, dout: present, rank 4, shaped, typed and placed as q, unit stride on D");
  if (!lse_tensor(p.lse, q, s)) return broken("lse: float32 [B, H, Sq], contiguous, on q's device");
  if (!like(p.dq, q)) return broken("dq: present, rank 4, shaped, typed and placed as q, unit stride on D");
  if (!like(p.dk, k) || !like(p.dv, k))
    return broken("dk, dv: present, rank 4, shaped, typed and placed as k, unit stride on D");
  if (!rows_apart(p.dq) || !rows_apart(p.dk) || !rows_apart(p.dv))
    return broken("dq, dk, dv: rows that do not overlap");
  return Verdict{true, "", s};
}

Verdict metadata_verdict(const AttentionInputs& in, const ProblemShape& s) {
  auto value = [](const TensorRef& t, std::int64_t i) -> std::int64_t {
    return t.dtype == DType::i64 ? static_cast<const std::int64_t*>(t.data)[i]
                                 : static_cast<const std::int32_t*>(t.data)[i];
  };
  const std::int64_t rows = s.batch * s.heads * s.num_q_blocks;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t count = value(in.q2k_num, r);
    if (count < 0 || count > s.max_kv) return broken("q2k_num in [0, max_kv]");
    for (std::int64_t e = 0; e < count; ++e) {
      const std::int64_t j = value(in.q2k_idx, r * s.max_kv + e);
      if (j < 0 || j >= s.num_kv_blocks) return broken("listed ids in [0, NK)");
    }
  }
  for (std::int64_t j = 0; j < s.num_kv_blocks; ++j) {
    const std::int64_t n = value(in.variable_block_sizes, j);
    if (n < 0 || n > s.block) return broken("variable_block_sizes in [0, blk]");
  }
  if (in.q_variable_block_sizes.defined())
    for (std::int64_t i = 0; i < s.num_q_blocks; ++i) {
      const std::int64_t n = value(in.q_variable_block_sizes, i);
      if (n < 0 || n > s.block) return broken("q_variable_block_sizes in [0, blk]");
    }
  return Verdict{true, "", s};
}

}  // namespace vsa::fuzz
