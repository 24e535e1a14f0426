// The CUDA backend of a build without CUDA: every entry point says so.
#include "cuda/cuda_backend.hpp"
#include "vsa/error.hpp"

namespace vsa::cuda {
namespace {

[[noreturn]] void no_cuda() {
  throw Error(ErrorKind::unsupported, "q.device", "cpu tensors (this build of vsa has no CUDA backend)",
              "cuda tensors");
}

}  // namespace

bool compiled() { return false; }
std::string archs() { return ""; }
int device_arch(int) { no_cuda(); }
std::string forward_kernel(int) { no_cuda(); }

Support supported(const AttentionInputs&, const ProblemShape&) {
  return Support{false, "this build of vsa has no CUDA backend"};
}

void forward(const ForwardParams&, const ProblemShape&, float) { no_cuda(); }
std::size_t backward_workspace_bytes(const BackwardParams&, const ProblemShape&) { no_cuda(); }
void backward(const BackwardParams&, const ProblemShape&, float) { no_cuda(); }
void map_to_index(const TensorRef&, const TensorRef&, const TensorRef&, void*) { no_cuda(); }
void invert_indices(const TensorRef&, const TensorRef&, std::int64_t, const TensorRef&,
                    const TensorRef&, void*) {
  no_cuda();
}
void topk_to_index(const TensorRef&, const TensorRef&, const TensorRef&, void*) { no_cuda(); }
void pack_varlen_index(const TensorRef&, const TensorRef&, const TensorRef&, const TensorRef&, const TensorRef&,
                       void*) {
  no_cuda();
}

void block_mean(const BlockMeanParams&) { no_cuda(); }
void block_means(const BlockMeansParams&) { no_cuda(); }
void block_mean_backward(const BlockMeanBackwardParams&) { no_cuda(); }
void coarse_stage(const CoarseStageParams&, float) { no_cuda(); }
void coarse_stage_backward(const CoarseStageBackwardParams&, const detail::CoarseShape&) { no_cuda(); }
std::size_t coarse_stage_backward_workspace_bytes(const detail::CoarseShape&) { no_cuda(); }
void gate_combine(const GateCombineParams&) { no_cuda(); }
void gate_combine_backward(const GateCombineBackwardParams&) { no_cuda(); }

}  // namespace vsa::cuda
