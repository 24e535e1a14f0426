#include "layer.hpp"

#include <cstdint>
#include <optional>
#include <string>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "tensor_ref.hpp"
#include "vsa/layer.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vsa::python {
namespace {

// One block-mean part's parameters; `names` are the bound arguments' (x, its counts, its mean),
// which the core's checks name in their messages.
BlockMeanParams block_mean_params(const InArray& x, const InArray& counts, const OutArray& mean,
                                  const char* const (&names)[3], const std::string& layout, std::uintptr_t stream) {
  BlockMeanParams p;
  p.x = to_tensor_ref(x, names[0]);
  p.valid_counts = to_tensor_ref(counts, names[1]);
  p.mean = to_tensor_ref(mean, names[2]);
  p.layout = to_layout(layout);
  p.stream = as_stream(stream);
  return p;
}

void run_block_mean(const InArray& x, const InArray& valid_counts, const OutArray& mean,
                    const std::string& layout, std::uintptr_t stream) {
  const BlockMeanParams p = block_mean_params(x, valid_counts, mean, {"x", "valid_counts", "mean"}, layout, stream);
  nb::gil_scoped_release no_gil;
  block_mean(p);
}

void run_block_means(const InArray& q, const InArray& k, const InArray& v, const InArray& q_counts,
                     const InArray& kv_counts, const OutArray& q_mean, const OutArray& k_mean,
                     const OutArray& v_mean, const std::string& layout, std::uintptr_t stream) {
  // The core's own checks name the part too: "k.x", ...
  const BlockMeansParams p{
      block_mean_params(q, q_counts, q_mean, {"q", "q_counts", "q_mean"}, layout, stream),
      block_mean_params(k, kv_counts, k_mean, {"k", "kv_counts", "k_mean"}, layout, stream),
      block_mean_params(v, kv_counts, v_mean, {"v", "kv_counts", "v_mean"}, layout, stream)};
  nb::gil_scoped_release no_gil;
  block_means(p);
}

void run_block_mean_backward(const InArray& dmean, const InArray& valid_counts, const OutArray& dx,
                             const std::string& layout, std::uintptr_t stream) {
  BlockMeanBackwardParams p;
  p.dmean = to_tensor_ref(dmean, "dmean");
  p.valid_counts = to_tensor_ref(valid_counts, "valid_counts");
  p.dx = to_tensor_ref(dx, "dx");
  p.layout = to_layout(layout);
  p.stream = as_stream(stream);
  nb::gil_scoped_release no_gil;
  block_mean_backward(p);
}

void run_coarse_stage(const InArray& q_mean, const InArray& k_mean, const InArray& v_mean,
                      const InArray& variable_block_sizes, const OutArray& coarse_out,
                      const OutArray& q2k_idx, const OutArray& q2k_num, float scale,
                      std::uintptr_t stream) {
  CoarseStageParams p;
  p.q_mean = to_tensor_ref(q_mean, "q_mean");
  p.k_mean = to_tensor_ref(k_mean, "k_mean");
  p.v_mean = to_tensor_ref(v_mean, "v_mean");
  p.variable_block_sizes = to_tensor_ref(variable_block_sizes, "variable_block_sizes");
  p.coarse_out = to_tensor_ref(coarse_out, "coarse_out");
  p.q2k_idx = to_tensor_ref(q2k_idx, "q2k_idx");
  p.q2k_num = to_tensor_ref(q2k_num, "q2k_num");
  p.scale = scale;
  p.stream = as_stream(stream);
  nb::gil_scoped_release no_gil;
  coarse_stage(p);
}

CoarseStageBackwardParams coarse_backward_params(const InArray& q_mean, const InArray& k_mean,
                                                 const InArray& v_mean, const InArray& variable_block_sizes,
                                                 const InArray& coarse_out, const InArray& dcoarse,
                                                 const OutArray& dq_mean, const OutArray& dk_mean,
                                                 const OutArray& dv_mean, float scale) {
  CoarseStageBackwardParams p;
  p.q_mean = to_tensor_ref(q_mean, "q_mean");
  p.k_mean = to_tensor_ref(k_mean, "k_mean");
  p.v_mean = to_tensor_ref(v_mean, "v_mean");
  p.variable_block_sizes = to_tensor_ref(variable_block_sizes, "variable_block_sizes");
  p.coarse_out = to_tensor_ref(coarse_out, "coarse_out");
  p.dcoarse = to_tensor_ref(dcoarse, "dcoarse");
  p.dq_mean = to_tensor_ref(dq_mean, "dq_mean");
  p.dk_mean = to_tensor_ref(dk_mean, "dk_mean");
  p.dv_mean = to_tensor_ref(dv_mean, "dv_mean");
  p.scale = scale;
  return p;
}

std::size_t run_coarse_stage_backward_workspace_bytes(const InArray& q_mean, const InArray& k_mean,
                                                      const InArray& v_mean, const InArray& variable_block_sizes,
                                                      const InArray& coarse_out, const InArray& dcoarse,
                                                      const OutArray& dq_mean, const OutArray& dk_mean,
                                                      const OutArray& dv_mean, float scale) {
  return coarse_stage_backward_workspace_bytes(coarse_backward_params(
      q_mean, k_mean, v_mean, variable_block_sizes, coarse_out, dcoarse, dq_mean, dk_mean, dv_mean, scale));
}

void run_coarse_stage_backward(const InArray& q_mean, const InArray& k_mean, const InArray& v_mean,
                               const InArray& variable_block_sizes, const InArray& coarse_out,
                               const InArray& dcoarse, const std::optional<OutArray>& workspace,
                               const OutArray& dq_mean, const OutArray& dk_mean, const OutArray& dv_mean,
                               float scale, std::uintptr_t stream) {
  CoarseStageBackwardParams p = coarse_backward_params(q_mean, k_mean, v_mean, variable_block_sizes, coarse_out,
                                                       dcoarse, dq_mean, dk_mean, dv_mean, scale);
  if (workspace) {
    p.workspace = workspace->data();
    p.workspace_bytes = workspace->nbytes();
  }
  p.stream = as_stream(stream);
  nb::gil_scoped_release no_gil;
  coarse_stage_backward(p);
}

void run_gate_combine(const InArray& fine, const InArray& coarse, const std::optional<InArray>& gate,
                      const OutArray& out, const std::string& layout, std::uintptr_t stream) {
  GateCombineParams p;
  p.fine = to_tensor_ref(fine, "fine");
  p.coarse = to_tensor_ref(coarse, "coarse");
  p.gate = to_tensor_ref(gate, "gate");
  p.out = to_tensor_ref(out, "out");
  p.layout = to_layout(layout);
  p.stream = as_stream(stream);
  nb::gil_scoped_release no_gil;
  gate_combine(p);
}

void run_gate_combine_backward(const InArray& dout, const InArray& coarse,
                               const std::optional<InArray>& gate, const OutArray& dcoarse,
                               const std::optional<OutArray>& dgate, const std::string& layout,
                               std::uintptr_t stream) {
  GateCombineBackwardParams p;
  p.dout = to_tensor_ref(dout, "dout");
  p.coarse = to_tensor_ref(coarse, "coarse");
  p.gate = to_tensor_ref(gate, "gate");
  p.dcoarse = to_tensor_ref(dcoarse, "dcoarse");
  p.dgate = to_tensor_ref(dgate, "dgate");
  p.layout = to_layout(layout);
  p.stream = as_stream(stream);
  nb::gil_scoped_release no_gil;
  gate_combine_backward(p);
}

}  // namespace

void bind_layer(nb::module_& m) {
  m.def("block_mean", &run_block_mean, "x"_a, "valid_counts"_a, "mean"_a, "layout"_a, "stream"_a,
        "Means of x [B, H, S, D] over the valid tokens of each of its len(valid_counts) blocks "
        "into the caller's float32 `mean` [B, H, N, D].");
  m.def("block_means", &run_block_means, "q"_a, "k"_a, "v"_a, "q_counts"_a, "kv_counts"_a, "q_mean"_a,
        "k_mean"_a, "v_mean"_a, "layout"_a, "stream"_a,
        "block_mean of q (over q_counts) and of k and v (over kv_counts) in one call (on CUDA one "
        "launch), into the caller's float32 means.");
  m.def("block_mean_backward", &run_block_mean_backward, "dmean"_a, "valid_counts"_a, "dx"_a,
        "layout"_a, "stream"_a,
        "The gradient of block_mean into the caller's `dx` (x's shape): dmean / count on "
        "valid tokens, 0 on pad tokens.");
  m.def("coarse_stage", &run_coarse_stage, "q_mean"_a, "k_mean"_a, "v_mean"_a,
        "variable_block_sizes"_a, "coarse_out"_a, "q2k_idx"_a, "q2k_num"_a, "scale"_a, "stream"_a,
        "Dense attention over block means into `coarse_out`, and each row's top-k live blocks "
        "(top-k = q2k_idx's last axis) as sorted lists. scale 0 means 1/sqrt(D).");
  m.def("coarse_stage_backward_workspace_bytes", &run_coarse_stage_backward_workspace_bytes, "q_mean"_a,
        "k_mean"_a, "v_mean"_a, "variable_block_sizes"_a, "coarse_out"_a, "dcoarse"_a, "dq_mean"_a,
        "dk_mean"_a, "dv_mean"_a, "scale"_a,
        "Bytes of device scratch coarse_stage_backward needs (0 on the CPU).");
  m.def("coarse_stage_backward", &run_coarse_stage_backward, "q_mean"_a, "k_mean"_a, "v_mean"_a,
        "variable_block_sizes"_a, "coarse_out"_a, "dcoarse"_a, "workspace"_a.none(), "dq_mean"_a,
        "dk_mean"_a, "dv_mean"_a, "scale"_a, "stream"_a,
        "The gradients of coarse_stage's output with respect to the three means, into the caller's "
        "float32 dq_mean, dk_mean and dv_mean. scale 0 means 1/sqrt(D).");
  m.def("gate_combine", &run_gate_combine, "fine"_a, "coarse"_a, "gate"_a.none(), "out"_a,
        "layout"_a, "stream"_a,
        "out = fine + coarse (broadcast over each block's tokens) * gate (1 when None).");
  m.def("gate_combine_backward", &run_gate_combine_backward, "dout"_a, "coarse"_a, "gate"_a.none(),
        "dcoarse"_a, "dgate"_a.none(), "layout"_a, "stream"_a,
        "dcoarse = per-block sums of dout * gate; dgate = dout * coarse (None without a gate).");
}

}  // namespace vsa::python
