// CUDA backend entry points, callable from host-only code. When the library
// is built without CUDA, cuda_absent.cpp provides versions that say so.
#pragma once

#include <cstddef>
#include <string>

#include "core/coarse_shape.hpp"
#include "vsa/attention.hpp"
#include "vsa/layer.hpp"

namespace vsa::cuda {

bool compiled();
std::string archs();  // e.g. "80;89;90;100a;103a;120" as built

// Compute capability of a device as major*10+minor (cached per device; no sync).
int device_arch(int device_index);

// Name of the forward kernel dispatch picks for a device (see kernel_choice.hpp).
std::string forward_kernel(int device_index);

// Static support facts for CUDA tensors (arch, dtype, alignment).
Support supported(const AttentionInputs& in, const ProblemShape& s);

void forward(const ForwardParams& p, const ProblemShape& s, float scale);

// Device scratch the backward needs for this problem, and the backward itself
// (backward/backward.cu).
std::size_t backward_workspace_bytes(const BackwardParams& p, const ProblemShape& s);
void backward(const BackwardParams& p, const ProblemShape& s, float scale);

void map_to_index(const TensorRef& block_map, const TensorRef& q2k_idx, const TensorRef& q2k_num,
                  void* stream);
void invert_indices(const TensorRef& q2k_idx, const TensorRef& q2k_num, std::int64_t num_kv_blocks,
                    const TensorRef& k2q_idx, const TensorRef& k2q_num, void* stream);
void topk_to_index(const TensorRef& topk, const TensorRef& q2k_idx, const TensorRef& q2k_num,
                   void* stream);
void pack_varlen_index(const TensorRef& local_idx, const TensorRef& q2k_num, const TensorRef& cu_q_blocks,
                       const TensorRef& cu_kv_blocks, const TensorRef& packed_idx, void* stream);

// The VSA layer's stages (layer/*.cu).
void block_mean(const BlockMeanParams& p);
void block_means(const BlockMeansParams& p);
void block_mean_backward(const BlockMeanBackwardParams& p);
void coarse_stage(const CoarseStageParams& p, float scale);
void coarse_stage_backward(const CoarseStageBackwardParams& p, const detail::CoarseShape& shape);
std::size_t coarse_stage_backward_workspace_bytes(const detail::CoarseShape& shape);
void gate_combine(const GateCombineParams& p);
void gate_combine_backward(const GateCombineBackwardParams& p);

}  // namespace vsa::cuda
