// Public entry points of the VSA layer's stages (vsa/layer.hpp): argument
// checks, then the backend of the device holding the tensors.
#include "vsa/layer.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "core/check.hpp"
#include "core/coarse_shape.hpp"
#include "core/layout.hpp"
#include "cpu/cpu_backend.hpp"
#include "cuda/cuda_backend.hpp"

namespace vsa {
namespace {

using detail::expect_contiguous;
using detail::expect_defined;
using detail::expect_dtype;
using detail::expect_int_dtype;
using detail::expect_like;
using detail::expect_output_like;
using detail::expect_rank;
using detail::expect_same_device;
using detail::expect_sequence_tensor;
using detail::expect_shape;
using detail::expect_unshared;
using detail::fail;
using detail::unless_same_view;
using detail::CoarseShape;
using detail::HeadView;

std::string str(std::int64_t v) { return std::to_string(v); }
std::string field(const char* name, const char* what) { return std::string(name) + "." + what; }

void expect_layout(Layout layout) {
  if (layout != Layout::bhsd && layout != Layout::bshd)
    fail("layout", "bhsd or bshd", "value " + str(static_cast<int>(layout)));
}

// A q/k/v-shaped tensor of the layer: non-empty, D of 64 or 128.
HeadView layer_sequence(const TensorRef& x, const char* name, Layout layout) {
  expect_sequence_tensor(x, name);
  const HeadView v = detail::head_view(x, layout);
  if (v.dim != 64 && v.dim != 128)
    detail::fail_unsupported(field(name, "shape"), "head dim D of 64 or 128", "D = " + str(v.dim));
  if (v.batch < 1 || v.heads < 1 || v.seq < 1)
    fail(field(name, "shape"), "non-empty batch, head and sequence extents", x.shape_string());
  return v;
}

// Tokens per block when a sequence of v.seq tokens splits into `blocks` blocks.
std::int64_t tokens_per_block(const HeadView& v, std::int64_t blocks, const std::string& argument) {
  if (blocks < 1 || v.seq % blocks != 0)
    fail(argument, "a block count dividing the " + str(v.seq) + " tokens of the sequence",
         str(blocks) + " blocks");
  return v.seq / blocks;
}

// A contiguous float32 tensor of the given shape on `ref`'s device.
void expect_f32(const TensorRef& t, const char* name, const TensorRef& ref, const char* ref_name,
                std::initializer_list<std::int64_t> dims) {
  expect_defined(t, name);
  expect_same_device(t, name, ref, ref_name);
  expect_dtype(t, name, DType::f32);
  expect_shape(t, name, dims);
  expect_contiguous(t, name);
}

// A contiguous int32/int64 vector on `ref`'s device.
void expect_int_vector(const TensorRef& t, const char* name, const TensorRef& ref, const char* ref_name) {
  expect_defined(t, name);
  expect_same_device(t, name, ref, ref_name);
  expect_rank(t, name, 1);
  expect_int_dtype(t, name);
  expect_contiguous(t, name);
}

// Host-resident counts: every value in [0, block].
void check_count_values(const TensorRef& counts, const char* name, std::int64_t block) {
  for (std::int64_t n = 0; n < counts.shape[0]; ++n) {
    const std::int64_t c = detail::load_int(counts, n);
    if (c < 0 || c > block)
      fail(name, "values in [0, blk = " + str(block) + "]", str(c) + " at block " + str(n));
  }
}

// The means of a sequence tensor `x`: counts [N] with N dividing S, and the
// float32 block tensor [B, H, N, D]. Returns blk. `part` prefixes every
// argument name ("k." in block_means; empty in block_mean).
std::int64_t check_block_tensors(const TensorRef& x, const char* x_name, const TensorRef& counts,
                                 const TensorRef& blocks, const char* blocks_name, Layout layout,
                                 const std::string& part = "") {
  const std::string xs = part + x_name, counts_name = part + "valid_counts", blocks_s = part + blocks_name;
  expect_layout(layout);
  const HeadView v = layer_sequence(x, xs.c_str(), layout);
  expect_int_vector(counts, counts_name.c_str(), x, xs.c_str());
  const std::int64_t block = tokens_per_block(v, counts.shape[0], counts_name + ".shape");
  expect_f32(blocks, blocks_s.c_str(), x, xs.c_str(), {v.batch, v.heads, counts.shape[0], v.dim});
  if (x.device == Device::cpu) check_count_values(counts, counts_name.c_str(), block);
  return block;
}

// fine/dout [B, H, Sq, D] against coarse [B, H, NQ, D]; gate optional.
void check_combine_tensors(const TensorRef& x, const char* x_name, const TensorRef& coarse,
                           const TensorRef& gate, Layout layout) {
  expect_layout(layout);
  const HeadView v = layer_sequence(x, x_name, layout);
  expect_defined(coarse, "coarse");
  expect_rank(coarse, "coarse", 4);
  const std::int64_t blocks = coarse.shape[2];
  tokens_per_block(v, blocks, "coarse.shape");
  expect_f32(coarse, "coarse", x, x_name, {v.batch, v.heads, blocks, v.dim});
  if (gate.defined()) expect_like(gate, "gate", x, x_name);
}

// The coarse stage's means: q_mean [B, H, NQ, D], k_mean and v_mean
// [B, Hkv, NK, D] (float32, contiguous, D 64 or 128, Hkv dividing H), the
// live-block counts [NK] and a scale (0: 1/sqrt(D)).
CoarseShape check_coarse_means(const TensorRef& q, const TensorRef& k_mean, const TensorRef& v_mean,
                               const TensorRef& variable_block_sizes, float scale) {
  expect_defined(q, "q_mean");
  expect_rank(q, "q_mean", 4);
  expect_dtype(q, "q_mean", DType::f32);
  expect_contiguous(q, "q_mean");
  CoarseShape c{};
  c.batch = q.shape[0], c.heads = q.shape[1], c.nq = q.shape[2], c.dim = q.shape[3];
  if (c.dim != 64 && c.dim != 128)
    detail::fail_unsupported("q_mean.shape", "head dim D of 64 or 128", "D = " + str(c.dim));
  if (c.batch < 1 || c.heads < 1 || c.nq < 1)
    fail("q_mean.shape", "non-empty batch, head and block extents", q.shape_string());

  expect_defined(k_mean, "k_mean");
  expect_rank(k_mean, "k_mean", 4);
  c.kv_heads = k_mean.shape[1], c.nk = k_mean.shape[2];
  if (c.kv_heads < 1 || c.heads % c.kv_heads != 0)
    fail("k_mean.shape", "kv heads dividing the " + str(c.heads) + " query heads (GQA)", k_mean.shape_string());
  if (c.nk < 1) fail("k_mean.shape", "at least one KV block", k_mean.shape_string());
  expect_f32(k_mean, "k_mean", q, "q_mean", {c.batch, c.kv_heads, c.nk, c.dim});
  expect_f32(v_mean, "v_mean", q, "q_mean", {c.batch, c.kv_heads, c.nk, c.dim});
  expect_int_vector(variable_block_sizes, "variable_block_sizes", q, "q_mean");
  expect_shape(variable_block_sizes, "variable_block_sizes", {c.nk});
  detail::expect_scale(scale);
  c.scale = scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(c.dim));
  return c;
}

CoarseShape check_coarse_backward(const CoarseStageBackwardParams& p) {
  const CoarseShape c = check_coarse_means(p.q_mean, p.k_mean, p.v_mean, p.variable_block_sizes, p.scale);
  const std::initializer_list<std::int64_t> rows = {c.batch, c.heads, c.nq, c.dim};
  const std::initializer_list<std::int64_t> keys = {c.batch, c.kv_heads, c.nk, c.dim};
  expect_f32(p.coarse_out, "coarse_out", p.q_mean, "q_mean", rows);
  expect_f32(p.dcoarse, "dcoarse", p.q_mean, "q_mean", rows);
  expect_f32(p.dq_mean, "dq_mean", p.q_mean, "q_mean", rows);
  expect_f32(p.dk_mean, "dk_mean", p.q_mean, "q_mean", keys);
  expect_f32(p.dv_mean, "dv_mean", p.q_mean, "q_mean", keys);
  return c;
}

}  // namespace

void block_mean(const BlockMeanParams& p) {
  check_block_tensors(p.x, "x", p.valid_counts, p.mean, "mean", p.layout);
  expect_unshared({{p.mean, "mean"}}, {{p.x, "x"}, {p.valid_counts, "valid_counts"}});
  if (p.x.device == Device::cpu)
    cpu::block_mean(p);
  else
    cuda::block_mean(p);
}

void block_means(const BlockMeansParams& p) {
  const std::pair<const BlockMeanParams*, std::string> parts[] = {{&p.q, "q."}, {&p.k, "k."}, {&p.v, "v."}};
  for (const auto& [part, name] : parts) {
    check_block_tensors(part->x, "x", part->valid_counts, part->mean, "mean", part->layout, name);
    if (part == &p.q) continue;
    expect_same_device(part->x, (name + "x").c_str(), p.q.x, "q.x");
    expect_dtype(part->x, (name + "x").c_str(), p.q.x.dtype);
    if (part->stream != p.q.stream) fail(name + "stream", "q.stream", "another stream");
  }
  expect_unshared({{p.q.mean, "q.mean"}, {p.k.mean, "k.mean"}, {p.v.mean, "v.mean"}},
                  {{p.q.x, "q.x"},
                   {p.k.x, "k.x"},
                   {p.v.x, "v.x"},
                   {p.q.valid_counts, "q.valid_counts"},
                   {p.k.valid_counts, "k.valid_counts"},
                   {p.v.valid_counts, "v.valid_counts"}});
  if (p.q.x.device == Device::cpu) {
    for (const auto& [part, name] : parts) cpu::block_mean(*part);
  } else {
    cuda::block_means(p);
  }
}

void block_mean_backward(const BlockMeanBackwardParams& p) {
  check_block_tensors(p.dx, "dx", p.valid_counts, p.dmean, "dmean", p.layout);
  detail::expect_distinct_rows(p.dx, "dx");
  expect_unshared({{p.dx, "dx"}}, {{p.dmean, "dmean"}, {p.valid_counts, "valid_counts"}});
  if (p.dx.device == Device::cpu)
    cpu::block_mean_backward(p);
  else
    cuda::block_mean_backward(p);
}

void coarse_stage(const CoarseStageParams& p) {
  const CoarseShape c = check_coarse_means(p.q_mean, p.k_mean, p.v_mean, p.variable_block_sizes, p.scale);
  const TensorRef& q = p.q_mean;
  expect_f32(p.coarse_out, "coarse_out", q, "q_mean", {c.batch, c.heads, c.nq, c.dim});
  expect_defined(p.q2k_idx, "q2k_idx");
  expect_rank(p.q2k_idx, "q2k_idx", 4);
  const std::int64_t topk = p.q2k_idx.shape[3];
  if (topk < 1 || topk > c.nk)
    fail("q2k_idx.shape", "a last axis (top-k) in [1, NK = " + str(c.nk) + "]", p.q2k_idx.shape_string());
  expect_same_device(p.q2k_idx, "q2k_idx", q, "q_mean");
  expect_int_dtype(p.q2k_idx, "q2k_idx");
  expect_shape(p.q2k_idx, "q2k_idx", {c.batch, c.heads, c.nq, topk});
  expect_contiguous(p.q2k_idx, "q2k_idx");
  expect_defined(p.q2k_num, "q2k_num");
  expect_same_device(p.q2k_num, "q2k_num", q, "q_mean");
  expect_shape(p.q2k_num, "q2k_num", {c.batch, c.heads, c.nq});
  expect_contiguous(p.q2k_num, "q2k_num");
  if (p.q2k_num.dtype != p.q2k_idx.dtype)
    fail("q2k_num.dtype", std::string(dtype_name(p.q2k_idx.dtype)) + " (as q2k_idx)",
         dtype_name(p.q2k_num.dtype));
  // Ids below NK and counts up to top-k, as map_to_index's lists.
  detail::expect_int32_holds(p.q2k_idx, "q2k_idx", c.nk - 1, "NK = " + str(c.nk) + " KV blocks");
  detail::expect_int32_holds(p.q2k_num, "q2k_num", topk, "top-k = " + str(topk));
  expect_unshared({{p.coarse_out, "coarse_out"}, {p.q2k_idx, "q2k_idx"}, {p.q2k_num, "q2k_num"}},
                  {{p.q_mean, "q_mean"}, {p.k_mean, "k_mean"}, {p.v_mean, "v_mean"},
                   {p.variable_block_sizes, "variable_block_sizes"}});

  if (q.device == Device::cpu)
    cpu::coarse_stage(p, c.scale);
  else
    cuda::coarse_stage(p, c.scale);
}

std::size_t coarse_stage_backward_workspace_bytes(const CoarseStageBackwardParams& p) {
  const CoarseShape c = check_coarse_backward(p);
  return p.q_mean.device == Device::cpu ? 0 : cuda::coarse_stage_backward_workspace_bytes(c);
}

void coarse_stage_backward(const CoarseStageBackwardParams& p) {
  const CoarseShape c = check_coarse_backward(p);
  expect_unshared({{p.dq_mean, "dq_mean"},
                   {p.dk_mean, "dk_mean"},
                   {p.dv_mean, "dv_mean"},
                   {detail::workspace_tensor(p.workspace, p.workspace_bytes, p.q_mean), "workspace"}},
                  {{p.q_mean, "q_mean"},
                   {p.k_mean, "k_mean"},
                   {p.v_mean, "v_mean"},
                   {p.variable_block_sizes, "variable_block_sizes"},
                   {p.coarse_out, "coarse_out"},
                   {p.dcoarse, "dcoarse"}});
  if (p.q_mean.device == Device::cpu)
    cpu::coarse_stage_backward(p, c);
  else
    cuda::coarse_stage_backward(p, c);
}

void gate_combine(const GateCombineParams& p) {
  check_combine_tensors(p.fine, "fine", p.coarse, p.gate, p.layout);
  expect_output_like(p.out, "out", p.fine, "fine");
  // out may be fine itself (documented in vsa/layer.hpp): each element is read before it is written.
  expect_unshared({{p.out, "out"}},
                  {{unless_same_view(p.fine, p.out), "fine"}, {p.coarse, "coarse"}, {p.gate, "gate"}});
  if (p.fine.device == Device::cpu)
    cpu::gate_combine(p);
  else
    cuda::gate_combine(p);
}

void gate_combine_backward(const GateCombineBackwardParams& p) {
  check_combine_tensors(p.dout, "dout", p.coarse, p.gate, p.layout);
  expect_f32(p.dcoarse, "dcoarse", p.dout, "dout",
             {p.coarse.shape[0], p.coarse.shape[1], p.coarse.shape[2], p.coarse.shape[3]});
  if (p.gate.defined())
    expect_output_like(p.dgate, "dgate", p.dout, "dout");
  else if (p.dgate.defined())
    fail("dgate", "undefined when there is no gate", "a tensor");
  expect_unshared({{p.dcoarse, "dcoarse"}, {p.dgate, "dgate"}},
                  {{p.dout, "dout"}, {p.coarse, "coarse"}, {p.gate, "gate"}});
  if (p.dout.device == Device::cpu)
    cpu::gate_combine_backward(p);
  else
    cuda::gate_combine_backward(p);
}

}  // namespace vsa
