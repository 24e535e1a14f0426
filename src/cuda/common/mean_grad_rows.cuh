// The block-mean gradient addends of BackwardParams (dq_mean, dk_mean,
// dv_mean): what the backward's epilogues add to one 64-row tile of dq, dk or
// dv before rounding, mean[col] / count on the block's valid rows, so the VSA
// layer's gradient needs no pass of its own (vsa/attention.hpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/block_lists.cuh"
#include "cuda/common/kernel_params.hpp"

namespace vsa::cuda {

struct MeanGradRows {
  const float* mean = nullptr;  // the block's mean-gradient row [D]; null: nothing is added
  float count = 1.0f;           // the block's valid rows, the mean's divisor
  int rows = 0;                 // the tile's rows below that count
  // grad of element (row, col) of the tile with the addend. Without a mean it is grad itself
  // (not grad + 0, which the compiler must keep: -0 + 0 is +0), so the kernels built without
  // addends compile to what they were before.
  __device__ float add_to(float grad, int row, int col) const {
    return mean != nullptr && row < rows ? grad + mean[col] / count : grad;
  }
};

// The tile of `rows` real rows (from row `offset` of its block) in block `block` of
// (batch, head): the addend of `means` ([B, heads, blocks, D]) with the block's divisor.
__device__ __forceinline__ MeanGradRows mean_grad_rows(const float* means, int batch, int heads, int head,
                                                       int blocks, std::int64_t block, int count, int rows,
                                                       int head_dim) {
  if (means == nullptr) return {};
  const std::int64_t row = (static_cast<std::int64_t>(batch) * heads + head) * blocks + block;
  return {means + row * head_dim, static_cast<float>(count), rows < 0 ? 0 : rows};
}

// Calls launch(std::true_type) when the call has mean-gradient addends, else
// launch(std::false_type): the backward kernels are built both ways, so the
// plain backward runs the code it ran before the addends existed (with them,
// ptxas allocated the Hopper key pass's registers differently and it ran
// 0.3-1.2 % slower).
template <class Launch>
void with_mean_grads(bool any, Launch&& launch) {
  if (any)
    launch(std::true_type{});
  else
    launch(std::false_type{});
}

}  // namespace vsa::cuda
