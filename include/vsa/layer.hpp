// The stages of the VSA layer (docs/layer.md) around the fine block-sparse
// attention of vsa/attention.hpp, as C++ entry points:
//
//   means   = block_means(q, k, v)                             float32 [B, H, N, D] each
//   coarse, q2k_idx, q2k_num = coarse_stage(means)             dense attention over the
//                                                              means + top-k block lists
//   fine    = forward(q, k, v, q2k_idx, q2k_num, vbs)          vsa/attention.hpp
//   out     = gate_combine(fine, coarse, gate)                 fine + coarse · gate
//
// (forward with ForwardParams::coarse and gate writes out in one pass, and
// with ForwardParams::fine keeps fine beside it for the backward),
// plus the backward of each: the means', the coarse stage's (dense
// attention's backward on the [B, H, N, D] means) and the combine's.
// Each runs on the device that holds its tensors, allocates no device memory
// (CUDA scratch is the caller's workspace; the CPU backend keeps host scratch
// of its own), and on CUDA enqueues work on `stream` without synchronizing.
//
// q/k/v-shaped tensors are [B, H, S, D] (layout bhsd) or [B, S, H, D] (bshd),
// unit stride on D; D is 64 or 128. A block holds blk = S / N tokens, where N
// is the length of the valid-count vector (variable_block_sizes for k and v,
// the query block sizes for q). Token t of a block is valid when t < its count.
// A tensor a call writes shares no memory with any other tensor of the call
// (vsa/attention.hpp says how that is checked); gate_combine's out may be fine
// itself.
#pragma once

#include "vsa/attention.hpp"

namespace vsa {

// mean[b, h, n, :] = the mean of x over the first valid_counts[n] tokens of
// block n (pad tokens are never read), accumulated in float64 in token order
// and rounded once to float32; 0 for a block with no valid token.
struct BlockMeanParams {
  TensorRef x;             // [B, H, S, D] in `layout`: bf16, f16 (CPU and CUDA) or f32 (CPU)
  TensorRef valid_counts;  // [N] int32 or int64, values in [0, blk]
  TensorRef mean;          // [B, H, N, D] f32, contiguous
  Layout layout = Layout::bhsd;
  void* stream = nullptr;
};
void block_mean(const BlockMeanParams& params);

// block_mean of the layer's q, k and v in one call: on CUDA one launch, since
// a block_mean launch fills less than one wave of the GPU and three launches
// ramp down three times (100 against 87 µs on Wan 480p; docs/kernel-notes.md).
// Each mean is block_mean's, bit for bit. The three tensors share a device,
// a dtype and a stream (each part's `stream`).
struct BlockMeansParams {
  BlockMeanParams q, k, v;
};
void block_means(const BlockMeansParams& params);

// The gradient of block_mean: dx = dmean / count on each valid token, 0 on
// pad tokens and on every token of an empty block.
struct BlockMeanBackwardParams {
  TensorRef dmean;         // [B, H, N, D] f32, contiguous
  TensorRef valid_counts;  // [N], as for block_mean
  TensorRef dx;            // x's shape and layout: bf16, f16 or f32 (CPU)
  Layout layout = Layout::bhsd;
  void* stream = nullptr;
};
void block_mean_backward(const BlockMeanBackwardParams& params);

// Dense attention over block means plus the top-k block selection of every
// (b, h, query block) row, in one pass over the row's scores.
//
//   score[i, j] = Σ_d Q[i, d] · K[j, d], exact, rounded to float32, with Q
//                 and K the mean vectors as 23-bit integers, each vector with
//                 its own exponent (docs/layer.md, "Precision"), identical on
//                 every backend. Query head h reads KV head h / (H / Hkv). A
//                 row or key mean holding an inf or NaN scores NaN (ranked
//                 above +inf).
//   live j      = variable_block_sizes[j] > 0; other blocks get no weight and
//                 are never selected.
//   coarse_out  = softmax over live j of score · scale, times v_mean (0 for a
//                 row with no live block).
//   q2k_num     = min(topk, number of live blocks), topk = q2k_idx's last axis.
//   q2k_idx     = the q2k_num live blocks of largest score, ties to the lower
//                 block id, written in ascending id order; then -1.
// The lists are the exact input block_sparse_attn takes.
struct CoarseStageParams {
  TensorRef q_mean;                // [B, H, NQ, D] f32, contiguous
  TensorRef k_mean, v_mean;        // [B, Hkv, NK, D] f32, contiguous; H % Hkv == 0
  TensorRef variable_block_sizes;  // [NK] int32 or int64
  float scale = 0.0f;              // softmax scale in (0, 2.3588e38]; 0 means 1/sqrt(D)
  TensorRef coarse_out;            // [B, H, NQ, D] f32, contiguous
  TensorRef q2k_idx;               // [B, H, NQ, topk] int32 or int64, 1 <= topk <= NK
  TensorRef q2k_num;               // [B, H, NQ], q2k_idx's dtype
  void* stream = nullptr;
};
void coarse_stage(const CoarseStageParams& params);

// The gradients of coarse_stage's coarse_out with respect to the three means
// (the lists have none), for a given dcoarse. Per (batch, KV head) the query
// rows of its H / Hkv query heads are taken together, and with
//   P      = coarse_stage's softmax weights: over live blocks of the scores
//            q_mean · k_meanᵀ · scale, 0 on dead blocks and in a row with no
//            live block,
//   dS     = P ∘ (dcoarse · v_meanᵀ − rowsum(dcoarse ∘ coarse_out)),
//   dq_mean = scale · dS · k_mean,  dk_mean = scale · dSᵀ · q_mean,
//   dv_mean = Pᵀ · dcoarse           (dk/dv summed over the group's rows).
// Precision: float64 on the CPU; on CUDA every product on the tensor cores
// with its operands rounded to TF32 (10 mantissa bits, finer than the bf16
// operands of the fine stage's backward) and float32 sums: ~4e-4 relative.
// The scores here are products of the means, not coarse_stage's exact
// integer scores (the lists, which need those, have no gradient). The result
// is bitwise repeatable on each backend (no atomics).
struct CoarseStageBackwardParams {
  TensorRef q_mean;                // [B, H, NQ, D] f32, contiguous, as for coarse_stage
  TensorRef k_mean, v_mean;        // [B, Hkv, NK, D] f32, contiguous
  TensorRef variable_block_sizes;  // [NK] int32 or int64
  float scale = 0.0f;              // coarse_stage's scale; 0 means 1/sqrt(D)
  TensorRef coarse_out;            // [B, H, NQ, D] f32, contiguous: coarse_stage's output
  TensorRef dcoarse;               // [B, H, NQ, D] f32, contiguous
  TensorRef dq_mean;               // [B, H, NQ, D] f32, contiguous
  TensorRef dk_mean, dv_mean;      // [B, Hkv, NK, D] f32, contiguous
  void* workspace = nullptr;       // device scratch of coarse_stage_backward_workspace_bytes(); CPU needs none
  std::size_t workspace_bytes = 0;
  void* stream = nullptr;
};
void coarse_stage_backward(const CoarseStageBackwardParams& params);
// The workspace coarse_stage_backward needs (checks the arguments first): on
// CUDA P and dS as float32 (~2 · B · Hkv · (group · NQ) · NK · 4 bytes) and
// the four means' TF32-rounded copies; 0 on the CPU.
std::size_t coarse_stage_backward_workspace_bytes(const CoarseStageBackwardParams& params);

// out = fine + coarse (broadcast over each query block's blk tokens, pad
// tokens included), times gate when given; computed in float32 and rounded
// once. `out` may be `fine` itself (the same view); it shares no memory with
// coarse or gate.
struct GateCombineParams {
  TensorRef fine;    // [B, H, Sq, D] in `layout`: bf16, f16 or f32 (CPU)
  TensorRef coarse;  // [B, H, NQ, D] f32, contiguous
  TensorRef gate;    // optional (undefined: gate 1): fine's shape and dtype
  TensorRef out;     // fine's shape and dtype
  Layout layout = Layout::bhsd;
  void* stream = nullptr;
};
void gate_combine(const GateCombineParams& params);

// Gradients of gate_combine for a given dout (dfine is dout itself):
// dcoarse[b, h, n] = the sum over the block's tokens of dout · gate (of dout
// without a gate), in float32; dgate = dout · coarse.
struct GateCombineBackwardParams {
  TensorRef dout;     // fine's shape, layout and dtype
  TensorRef coarse;   // [B, H, NQ, D] f32, contiguous
  TensorRef gate;     // optional, as in the forward
  TensorRef dcoarse;  // [B, H, NQ, D] f32, contiguous
  TensorRef dgate;    // dout's shape and dtype; defined exactly when gate is
  Layout layout = Layout::bhsd;
  void* stream = nullptr;
};
void gate_combine_backward(const GateCombineBackwardParams& params);

}  // namespace vsa
