// Block-sparse attention: the op contract (README.md, "The op contract") as a C++ API.
//
// Shapes (layout bhsd; with bshd the two middle dimensions swap for q/k/v/out
// and their gradients — lse is always [B, H, Sq]):
//   q, out, dout, dq  [B, H, Sq, D]        k, v, dk, dv  [B, Hkv, Skv, D]
//   q2k_idx [B, H, NQ, max_kv]  q2k_num [B, H, NQ]  variable_block_sizes [NK]
//   q_variable_block_sizes [NQ] (optional)
//   lse [B, H, Sq] fp32, base 2.
// blk = Skv / NK (64 or 128); Sq must equal NQ * blk. H % Hkv == 0 (GQA).
//
// A tensor a call writes shares no memory with any other tensor the call reads
// or writes (CUDA workspace included); every entry point of vsa/attention.hpp,
// vsa/layer.hpp and vsa/metadata.hpp refuses such a call (invalid_argument,
// naming both tensors) before it reads or writes anything. Inputs may share
// memory freely, and tensors whose elements only interleave share none: q, k
// and v, or dq, dk and dv, as slices of one packed [B, S, 3, H, D] buffer. Where
// the interleaving cannot be shown element-exact (each tensor's innermost dense
// run must fit within the gcd of both tensors' outer strides), overlapping
// address ranges are refused. The only exceptions are the calls documented to
// write an output over one input in place (gate_combine's out = fine,
// topk_to_index's q2k_idx = topk, pack_varlen_index's packed_idx = local_idx),
// and only when it is that input itself: the same pointer, dtype, shape and
// strides.
#pragma once

#include <cstddef>
#include <string>

#include "vsa/tensor.hpp"

namespace vsa {

enum class Layout : std::uint8_t { bhsd, bshd };

// LSE written for a row that attends to nothing (count 0, or every listed
// block has zero valid keys). It stands for log2(0) = -inf but stays finite so
// it survives NaN checks: exp2(kEmptyRowLse - x) == 0 for any sane x, so a
// merge of partial results weights such a row by zero. Its `out` row is
// exactly zero.
constexpr float kEmptyRowLse = -1.0e30f;

// Duplicate indices: a block listed twice in one row is attended twice (its
// keys enter the softmax twice), on every backend. Order within a row does
// not matter beyond floating-point rounding.

struct AttentionInputs {
  TensorRef q, k, v;
  TensorRef q2k_idx;               // int32 or int64; only the first q2k_num entries are read
  TensorRef q2k_num;               // int32 or int64, values in [0, max_kv]
  TensorRef variable_block_sizes;  // int32 or int64, values in [0, blk]
  // Optional (data null: every query row is real, the behaviour without it).
  // [NQ], int32 or int64, values in [0, blk], contiguous, on q's device: rows
  // at offset >= q_variable_block_sizes[i] inside query block i are padding
  // (the VSA layer's partial tiles, where the sequence was padded to whole
  // blocks). A padding row's out row is exactly 0 (with the fused combine:
  // 0 + coarse · gate) and its lse is kEmptyRowLse; in the backward its dq
  // row is exactly 0 and it adds nothing to dk or dv, whatever out and lse
  // hold in that row and whatever finite values q and dout hold there (the
  // CUDA backward multiplies those by zero: NaN or inf would leak). Real rows get what they get without it, to
  // rounding (on the CPU the products run over fewer rows, and OpenBLAS rounds
  // a product's edge rows differently; the GPU kernels run the same tiles).
  // The CPU backend does no work for padding rows.
  TensorRef q_variable_block_sizes;
  Layout layout = Layout::bhsd;
  float scale = 0.0f;  // softmax scale in (0, 2.3588e38]; 0 means the default 1/sqrt(D)
};

struct ForwardParams {
  AttentionInputs in;
  TensorRef out;         // q's shape, layout and dtype; any strides with unit stride on D (on
                         // CUDA, rows 16-byte aligned: outer strides multiples of 8 elements)
                         // whose rows do not overlap (as for every tensor a call writes), sharing
                         // no memory with another tensor of the call (see the top of this file)
  TensorRef lse;         // [B, H, Sq] fp32; may be undefined when need_lse is false
  bool need_lse = true;
  void* stream = nullptr;  // cudaStream_t for CUDA tensors; ignored on the CPU
  // Optional epilogue addend, the VSA layer's gate combine fused into the
  // write of `out` (vsa/layer.hpp, gate_combine). When coarse is defined,
  //   out[b, h, t, :] = round(fmaf(coarse[b, h, t / blk, :], gate[b, h, t, :], fine))
  // where fine is the attention already rounded to out's dtype (gate 1
  // without a gate): bitwise what forward followed by gate_combine gives.
  // lse stays the attention's. gate without coarse is an error.
  TensorRef coarse;  // [B, H, NQ, D] fp32, contiguous; or undefined
  TensorRef gate;    // optional with coarse: out's rules (q's shape, layout and dtype)
  // Optional with coarse: also written, with out's rules, is the attention
  // alone (what out holds without the combine, bitwise), which the layer's
  // training path keeps for its backward (delta = rowsum(dout ∘ fine)); one
  // pass writes both instead of a forward and a gate_combine.
  TensorRef fine;
};

// Each backend builds the KV->Q lists it needs from the validated q2k lists
// itself (on CUDA inside `workspace`), so a caller never passes them.
struct BackwardParams {
  AttentionInputs in;
  TensorRef out, lse, dout;  // from the forward pass
  TensorRef dq, dk, dv;  // dk/dv of a GQA head are summed over its query heads
  // dk and dv are always bitwise repeatable. dq is too on the CPU; on CUDA a
  // dQ pass sums each row in list order when `deterministic` asks for it, and
  // always on the Hopper kernels at head dim 128 (from dS tiles the key pass
  // stores in the workspace, 8 KB per listed pair of 64-token tiles, in groups
  // under VSA_CUDA_DS_WORKSPACE_MB); otherwise dq is summed by float atomics.
  bool deterministic = false;
  // Optional addends, the VSA layer's block-mean gradients fused into the
  // writes of dq, dk and dv (vsa/layer.hpp, block_mean_backward): when
  // dq_mean is defined, every real row t of query block n (t below its
  // q_variable_block_sizes, all rows without it) gets
  //   dq[b, h, t, :] = round(grad + dq_mean[b, h, n, :] / count(n))
  // where grad is the attention's float32 gradient, rounded once; padding rows
  // stay exactly 0. dk_mean and dv_mean do the same for dk and dv over each KV
  // block's variable_block_sizes valid rows. Each is optional on its own;
  // [B, H, NQ, D] (dq_mean) or [B, Hkv, NK, D] float32, contiguous.
  TensorRef dq_mean, dk_mean, dv_mean;
  void* workspace = nullptr;  // device scratch of backward_workspace_bytes(); CPU needs none
  std::size_t workspace_bytes = 0;
  void* stream = nullptr;
};

// Shape facts derived once from validated inputs.
struct ProblemShape {
  std::int64_t batch, heads, kv_heads, seq_q, seq_kv, head_dim;
  std::int64_t block, num_q_blocks, num_kv_blocks, max_kv;
};

struct Support {
  bool ok = false;
  std::string reason;  // why not, when !ok
};

// Runs the forward pass on the device that holds the tensors.
void forward(const ForwardParams& params);

// Runs the backward pass (dq, dk, dv) on the device that holds the tensors.
void backward(const BackwardParams& params);
std::size_t backward_workspace_bytes(const BackwardParams& params);

// Static facts only (shapes, dtypes, device, arch, layout, alignment): never
// reads tensor contents, never synchronizes a device, never throws (a device
// that cannot be asked is a no, with the reason).
Support supported(const AttentionInputs& inputs);

// Checks shapes, dtypes and strides of the inputs (no tensor contents) and
// returns the derived problem shape; throws vsa::Error on the first problem.
ProblemShape check_inputs(const AttentionInputs& inputs);

// Whether this build has CUDA kernels compiled in, and for which archs.
bool cuda_compiled();
std::string cuda_archs();

// The CUDA forward kernel that runs for tensors on this device: "sm90" (the
// Hopper wgmma kernel) or "sm80" (the portable mma.sync kernel), or under the
// VSA_CUDA_KERNEL override also "sm90ws" or "sm90v1" (the Hopper forward's
// other versions). Throws vsa::Error without a CUDA build or device.
std::string cuda_forward_kernel(int device_index);

}  // namespace vsa
