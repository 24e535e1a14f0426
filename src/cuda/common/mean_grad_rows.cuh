// The block-mean gradient addends of BackwardParams (dq_mean, dk_mean,
// dv_mean): what the backward's epilogues add to one 64-row tile of dq, dk or
// dv before rounding, mean[col] / count on the block's valid rows, so the VSA
// layer's gradient needs no pass of its own (vsa/attention.hpp).
#pragma once

#include <cstdint>

#include "cuda/common/block_lists.cuh"
#include "cuda/common/kernel_params.hpp"

namespace vsa::cuda {

struct MeanGradRows {
  const float* mean = nullptr;  // the block's mean-gradient row [D]; null: nothing is added
  float count = 1.0f;           // the block's valid rows, the mean's divisor
  int rows = 0;                 // the tile's rows below that count
  __device__ float at(int row, int col) const { return mean != nullptr && row < rows ? mean[col] / count : 0.0f; }
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

}  // namespace vsa::cuda
