// CPU backend entry points. Inputs arrive validated (shapes, dtypes and
// metadata values); these only compute.
#pragma once

#include "core/coarse_shape.hpp"
#include "vsa/attention.hpp"
#include "vsa/layer.hpp"
#include "vsa/metadata.hpp"

namespace vsa::cpu {

void forward(const ForwardParams& p, const ProblemShape& s, float scale);
// The backward stores the probabilities P and their gradients dS of as many
// query blocks at once as fit this many floats (64 MiB), so that dk and dv
// reuse them; a larger GQA group runs in chunks. Tests pass a smaller budget.
constexpr std::int64_t kBackwardStoreFloats = std::int64_t{16} << 20;
void backward(const BackwardParams& p, const ProblemShape& s, float scale,
              std::int64_t store_floats = kBackwardStoreFloats);

void map_to_index(const TensorRef& block_map, const TensorRef& q2k_idx, const TensorRef& q2k_num);
void invert_indices(const TensorRef& q2k_idx, const TensorRef& q2k_num, std::int64_t num_kv_blocks,
                    const TensorRef& k2q_idx, const TensorRef& k2q_num);
void topk_to_index(const TensorRef& topk, const TensorRef& q2k_idx, const TensorRef& q2k_num);
void pack_varlen_index(const TensorRef& local_idx, const TensorRef& q2k_num, const TensorRef& cu_q_blocks,
                       const TensorRef& cu_kv_blocks, const TensorRef& packed_idx);

// The VSA layer's stages (cpu/layer_*.cpp).
void block_mean(const BlockMeanParams& p);
void block_mean_backward(const BlockMeanBackwardParams& p);
void coarse_stage(const CoarseStageParams& p, float scale);
void coarse_stage_backward(const CoarseStageBackwardParams& p, const detail::CoarseShape& shape);
void gate_combine(const GateCombineParams& p);
void gate_combine_backward(const GateCombineBackwardParams& p);

}  // namespace vsa::cpu
