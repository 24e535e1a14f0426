#include "attention.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "tensor_ref.hpp"
#include "vsa/attention.hpp"
#include "vsa/error.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vsa::python {
namespace {

// Arrays for the ops, or tensor descriptions (TensorSpec) for is_supported.
template <class Array>
AttentionInputs attention_inputs(const Array& q, const Array& k, const Array& v,
                                 const Array& q2k_idx, const Array& q2k_num,
                                 const Array& variable_block_sizes,
                                 const std::optional<Array>& q_variable_block_sizes, const std::string& layout,
                                 float scale) {
  AttentionInputs in;
  in.q = to_tensor_ref(q, "q");
  in.k = to_tensor_ref(k, "k");
  in.v = to_tensor_ref(v, "v");
  in.q2k_idx = to_tensor_ref(q2k_idx, "q2k_idx");
  in.q2k_num = to_tensor_ref(q2k_num, "q2k_num");
  in.variable_block_sizes = to_tensor_ref(variable_block_sizes, "variable_block_sizes");
  if (q_variable_block_sizes) in.q_variable_block_sizes = to_tensor_ref(*q_variable_block_sizes, "q_variable_block_sizes");
  in.layout = to_layout(layout);
  in.scale = scale;
  return in;
}

// What both forward entries share: the inputs, out and the stream.
ForwardParams forward_params(const InArray& q, const InArray& k, const InArray& v, const InArray& q2k_idx,
                             const InArray& q2k_num, const InArray& variable_block_sizes,
                             const std::optional<InArray>& q_variable_block_sizes, const OutArray& out,
                             const std::string& layout, float scale, std::uintptr_t stream) {
  ForwardParams p;
  p.in = attention_inputs(q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, layout, scale);
  p.out = to_tensor_ref(out, "out");
  p.stream = as_stream(stream);
  return p;
}

void run_forward(const InArray& q, const InArray& k, const InArray& v, const InArray& q2k_idx,
                 const InArray& q2k_num, const InArray& variable_block_sizes,
                 const std::optional<InArray>& q_variable_block_sizes, const OutArray& out,
                 const std::optional<OutArray>& lse, const std::string& layout, float scale,
                 bool need_lse, std::uintptr_t stream) {
  ForwardParams p = forward_params(q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, out,
                                   layout, scale, stream);
  p.lse = to_tensor_ref(lse, "lse");
  p.need_lse = need_lse;
  nb::gil_scoped_release no_gil;
  forward(p);
}

// The forward with the VSA layer's gate combine in its epilogue; the attention
// alone (fine) and its lse only where the caller asks for them (training).
void run_fine_stage_gated(const InArray& q, const InArray& k, const InArray& v,
                          const InArray& q2k_idx, const InArray& q2k_num,
                          const InArray& variable_block_sizes,
                          const std::optional<InArray>& q_variable_block_sizes, const InArray& coarse,
                          const std::optional<InArray>& gate, const OutArray& out,
                          const std::optional<OutArray>& fine, const std::optional<OutArray>& lse,
                          const std::string& layout, float scale, std::uintptr_t stream) {
  ForwardParams p = forward_params(q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, out,
                                   layout, scale, stream);
  p.lse = to_tensor_ref(lse, "lse");
  p.need_lse = lse.has_value();
  p.coarse = to_tensor_ref(coarse, "coarse");
  p.gate = to_tensor_ref(gate, "gate");
  p.fine = to_tensor_ref(fine, "fine");
  nb::gil_scoped_release no_gil;
  forward(p);
}

BackwardParams backward_params(const InArray& q, const InArray& k, const InArray& v,
                               const InArray& q2k_idx, const InArray& q2k_num,
                               const InArray& variable_block_sizes,
                               const std::optional<InArray>& q_variable_block_sizes, const InArray& out,
                               const InArray& lse, const InArray& dout, const OutArray& dq,
                               const OutArray& dk, const OutArray& dv,
                               const std::string& layout, float scale, bool deterministic) {
  BackwardParams p;
  p.in = attention_inputs(q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, layout, scale);
  p.out = to_tensor_ref(out, "out");
  p.lse = to_tensor_ref(lse, "lse");
  p.dout = to_tensor_ref(dout, "dout");
  p.dq = to_tensor_ref(dq, "dq");
  p.dk = to_tensor_ref(dk, "dk");
  p.dv = to_tensor_ref(dv, "dv");
  p.deterministic = deterministic;
  return p;
}

void run_backward(const InArray& q, const InArray& k, const InArray& v, const InArray& q2k_idx,
                  const InArray& q2k_num, const InArray& variable_block_sizes,
                  const std::optional<InArray>& q_variable_block_sizes, const InArray& out,
                  const InArray& lse, const InArray& dout, const std::optional<InArray>& dq_mean,
                  const std::optional<InArray>& dk_mean, const std::optional<InArray>& dv_mean,
                  const std::optional<OutArray>& workspace, const OutArray& dq, const OutArray& dk,
                  const OutArray& dv, const std::string& layout, float scale, bool deterministic,
                  std::uintptr_t stream) {
  BackwardParams p = backward_params(q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, out,
                                     lse, dout, dq, dk, dv, layout, scale, deterministic);
  p.dq_mean = to_tensor_ref(dq_mean, "dq_mean");
  p.dk_mean = to_tensor_ref(dk_mean, "dk_mean");
  p.dv_mean = to_tensor_ref(dv_mean, "dv_mean");
  if (workspace) {
    p.workspace = workspace->data();
    p.workspace_bytes = workspace->nbytes();
  }
  p.stream = as_stream(stream);
  nb::gil_scoped_release no_gil;
  backward(p);
}

std::size_t workspace_bytes(const InArray& q, const InArray& k, const InArray& v,
                            const InArray& q2k_idx, const InArray& q2k_num,
                            const InArray& variable_block_sizes,
                            const std::optional<InArray>& q_variable_block_sizes, const InArray& out,
                            const InArray& lse, const InArray& dout, const OutArray& dq,
                            const OutArray& dk, const OutArray& dv, const std::string& layout,
                            float scale, bool deterministic) {
  return backward_workspace_bytes(backward_params(q, k, v, q2k_idx, q2k_num, variable_block_sizes,
                                                  q_variable_block_sizes, out, lse, dout, dq, dk, dv,
                                                  layout, scale, deterministic));
}

std::pair<bool, std::string> is_supported(const TensorSpec& q, const TensorSpec& k,
                                          const TensorSpec& v, const TensorSpec& q2k_idx,
                                          const TensorSpec& q2k_num,
                                          const TensorSpec& variable_block_sizes,
                                          const std::string& layout, float scale) {
  AttentionInputs in;
  try {
    in = attention_inputs(q, k, v, q2k_idx, q2k_num, variable_block_sizes, std::optional<TensorSpec>{}, layout,
                          scale);
  } catch (const Error& e) {
    return {false, e.what()};
  }
  const Support s = supported(in);
  return {s.ok, s.reason};
}

}  // namespace

void bind_attention(nb::module_& m) {
  m.def("forward", &run_forward, "q"_a, "k"_a, "v"_a, "q2k_idx"_a, "q2k_num"_a,
        "variable_block_sizes"_a, "q_variable_block_sizes"_a.none(), "out"_a, "lse"_a.none(), "layout"_a,
        "scale"_a, "need_lse"_a, "stream"_a,
        "Block-sparse attention forward into the caller's `out` (q's shape) and `lse` "
        "([B, H, Sq] float32, base 2; may be None when need_lse is False). scale 0 means "
        "1/sqrt(D). q_variable_block_sizes [NQ] (or None: every row real): rows past it are "
        "padding, written as empty rows.");
  m.def("fine_stage_gated", &run_fine_stage_gated, "q"_a, "k"_a, "v"_a, "q2k_idx"_a, "q2k_num"_a,
        "variable_block_sizes"_a, "q_variable_block_sizes"_a.none(), "coarse"_a, "gate"_a.none(), "out"_a,
        "fine"_a.none(), "lse"_a.none(), "layout"_a, "scale"_a, "stream"_a,
        "forward, then out = out + coarse (broadcast over each block's tokens) * gate (1 when "
        "None) in the same kernel: bitwise forward followed by gate_combine. fine (or None) "
        "gets the forward's own output, lse (or None) its lse.");
  m.def("backward", &run_backward, "q"_a, "k"_a, "v"_a, "q2k_idx"_a, "q2k_num"_a,
        "variable_block_sizes"_a, "q_variable_block_sizes"_a.none(), "out"_a, "lse"_a, "dout"_a,
        "dq_mean"_a.none(), "dk_mean"_a.none(), "dv_mean"_a.none(), "workspace"_a.none(), "dq"_a, "dk"_a,
        "dv"_a, "layout"_a, "scale"_a, "deterministic"_a, "stream"_a,
        "Gradients dq, dk, dv into the caller's arrays. `workspace` holds at least "
        "backward_workspace_bytes(...) bytes when that is nonzero. dq_mean, dk_mean, dv_mean "
        "(float32 [B, H(kv), N, D] or None): block-mean gradients added to each block's valid "
        "rows as mean / count before rounding (the VSA layer's, fused).");
  m.def("backward_workspace_bytes", &workspace_bytes, "q"_a, "k"_a, "v"_a, "q2k_idx"_a,
        "q2k_num"_a, "variable_block_sizes"_a, "q_variable_block_sizes"_a.none(), "out"_a, "lse"_a, "dout"_a,
        "dq"_a, "dk"_a, "dv"_a, "layout"_a, "scale"_a, "deterministic"_a,
        "Device scratch bytes that backward needs for these arrays.");
  m.def("supported", &is_supported, "q"_a, "k"_a, "v"_a, "q2k_idx"_a, "q2k_num"_a,
        "variable_block_sizes"_a, "layout"_a, "scale"_a,
        "(ok, reason) from static facts only. Each tensor is a spec (shape, strides in "
        "elements, dtype name, 'cpu'|'cuda', device index): no memory is read.");
  m.def("cuda_compiled", &cuda_compiled, "Whether this build has CUDA kernels.");
  m.def("cuda_archs", &cuda_archs, "The CUDA architectures compiled in ('' without CUDA).");
  m.def("cuda_forward_kernel", &cuda_forward_kernel, "device_index"_a,
        "The CUDA forward kernel used for tensors on this device: 'sm90' or 'sm80'.");
  m.attr("kEmptyRowLse") = kEmptyRowLse;
}

}  // namespace vsa::python
