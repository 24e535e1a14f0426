// The one place that decides which backend runs an op: the device holding the
// tensors picks the backend; CUDA kernel choice (arch, dtype, D, blk) is made
// inside the CUDA backend's own dispatcher.
#include <string>

#include "core/check.hpp"
#include "cpu/cpu_backend.hpp"
#include "cuda/cuda_backend.hpp"
#include "vsa/attention.hpp"

namespace vsa {
namespace {

void require_cuda_support(const AttentionInputs& in, const ProblemShape& s) {
  const Support support = cuda::supported(in, s);
  if (!support.ok) throw Error(ErrorKind::unsupported, support.reason);
}

}  // namespace

bool cuda_compiled() { return cuda::compiled(); }
std::string cuda_archs() { return cuda::archs(); }
std::string cuda_forward_kernel(int device_index) { return cuda::forward_kernel(device_index); }

Support supported(const AttentionInputs& in) {
  ProblemShape s{};
  try {
    s = check_inputs(in);
  } catch (const Error& e) {
    return Support{false, e.what()};
  }
  if (in.q.device == Device::cpu) return Support{true, ""};
  // A device that cannot be asked (no driver, an index past the per-device caches) is an
  // answer too: supported() says no where the call itself would fail.
  try {
    return cuda::supported(in, s);
  } catch (const Error& e) {
    return Support{false, e.what()};
  }
}

void forward(const ForwardParams& p) {
  const ProblemShape s = check_inputs(p.in);
  detail::check_forward_outputs(p, s);
  const float scale = detail::resolved_scale(p.in, s);
  if (p.in.q.device == Device::cpu) {
    detail::check_metadata_values(p.in, s);
    cpu::forward(p, s, scale);
    return;
  }
  require_cuda_support(p.in, s);
  cuda::forward(p, s, scale);
}

std::size_t backward_workspace_bytes(const BackwardParams& p) {
  const ProblemShape s = check_inputs(p.in);
  // The CPU backend allocates its own host scratch.
  return p.in.q.device == Device::cpu ? 0 : cuda::backward_workspace_bytes(p, s);
}

void backward(const BackwardParams& p) {
  const ProblemShape s = check_inputs(p.in);
  detail::check_backward_tensors(p, s);
  const float scale = detail::resolved_scale(p.in, s);
  if (p.in.q.device == Device::cpu) {
    detail::check_metadata_values(p.in, s);
    cpu::backward(p, s, scale);
    return;
  }
  require_cuda_support(p.in, s);
  cuda::backward(p, s, scale);
}

}  // namespace vsa
