// What the attention kernels read: raw pointers, element strides and the
// problem facts, resolved on the host from validated vsa::ForwardParams /
// vsa::BackwardParams. Shared by both directions and every architecture.
#pragma once

#include <cstdint>

namespace vsa::cuda {

struct SeqStrides {
  std::int64_t batch, head, seq;  // in elements; D has unit stride
};

// The forward kernels (sm80 and sm90).
struct FwdKernelParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* lse;  // null when the caller does not need it
  SeqStrides q_stride, k_stride, v_stride, out_stride;

  const void* q2k_idx;  // [B, H, NQ, max_kv]
  const void* q2k_num;  // [B, H, NQ]
  const void* vbs;      // [NK]
  bool idx_is_64, num_is_64, vbs_is_64;  // metadata is read as stored: no conversion pass
  // q_variable_block_sizes [NQ], or null (every query row real): rows past it
  // are padding, written by the epilogue as empty rows.
  const void* q_vbs;
  bool q_vbs_is_64;

  int heads, kv_group;  // kv head = head / kv_group
  int num_q_blocks, max_kv, block;
  float scale_log2;  // softmax scale * log2(e): scores go straight into exp2

  // The VSA layer's gate combine fused into the epilogue (vsa::ForwardParams::coarse):
  // out = fine + coarse[b, h, row / block] · gate. coarse null: plain attention;
  // gate null (with coarse): gate 1.
  const void* gate;     // q's shape, D unit stride
  SeqStrides gate_stride;
  const float* coarse;  // [B, H, NQ, D] contiguous
  // With coarse (vsa::ForwardParams::fine): the attention alone, written beside out; or null.
  void* fine;
  SeqStrides fine_stride;
  // The SMs by which v2 phases its list walks (list_walk.cuh; kernel_choice.hpp says when), or 0,
  // and the launch's first waves over which the phase grows (walk_start.hpp).
  int walk_sms, walk_ramp_waves;
};

// The backward's kernels (sm80 and sm90). The key pass: a CTA owns one
// 64-key tile of one (batch, kv head) and walks the query row tiles that
// attend to it, writing dK and dV (and adding dS·K into dq_accum when that is
// set). The dQ pass (when dq_accum is null): a CTA owns one 64-row query tile
// and walks its list like the forward, writing dq.
struct BwdKernelParams {
  const void* q;
  const void* k;
  const void* v;
  const void* dout;
  void* dk;
  void* dv;
  SeqStrides q_stride, k_stride, v_stride, dout_stride, dk_stride, dv_stride;

  const float* lse;    // [B, H, Sq] base 2, as the forward wrote it
  const float* delta;  // [B, H, Sq] rowsum(dO ∘ O), from the row pass before
  float* dq_accum;     // [B, H, Sq, D] fp32 sums of dS·K, fragment order (dq_accum.cuh); or null
  void* dq;            // the dQ pass's output
  SeqStrides dq_stride;
  const int* k2q_offsets;  // [B·H·NK + 1]: where each (b, h, kv block)'s query blocks start
  const int* k2q_blocks;   // query block ids, ascending within each (b, h, kv block)
  const void* q2k_idx;     // [B, H, NQ, max_kv], for the dQ pass
  const void* q2k_num;     // [B, H, NQ]
  const void* vbs;         // [NK]
  bool idx_is_64, num_is_64, vbs_is_64;
  // q_variable_block_sizes [NQ], or null: padding query rows get P = dS = 0
  // in the key pass and a zero dq row.
  const void* q_vbs;
  bool q_vbs_is_64;
  int heads, kv_group;  // query heads h·kv_group .. (h+1)·kv_group-1 share kv head h
  int num_q_blocks, max_kv, num_kv_blocks, block;
  std::int64_t seq_q;
  float scale_log2;  // softmax scale * log2(e), as in the forward
  float scale;       // dK = scale · dSᵀ·Q; dQ's scale is applied when it is finished
  // BackwardParams' block-mean gradient addends (mean_grad_rows.cuh), or null. Last, so the
  // fields above keep their offsets (and the kernels without addends their code).
  const float* dq_mean;  // [B, H, NQ, D]
  const float* dk_mean;  // [B, Hkv, NK, D]
  const float* dv_mean;
  // The key pass's items in the order its CTAs take them (KeyScheduler; kv_lists.hpp).
  const int* kv_order;  // [B·Hkv·NK]: (batch · kv heads + kv head) · NK + kv block
  // The stored-dS path (DqMethod::stored_ds), run over groups of (batch, kv head) units: the key
  // pass stores each pair's dSᵀ tile (8 KB, in its family's order) into ds_tiles, and the dQ
  // pass sums dS·K over them. A tile's place: its k2q entry (ds_slots gives the dQ pass the
  // entry of a q2k entry) less the group's first, times (blk/64)², plus its (row tile, key
  // tile) within the pair of blocks. ds_tiles null: another path.
  unsigned char* ds_tiles;
  const int* ds_slots;  // [B·H·NQ·max_kv] (KvListArgs::slots)
  int ds_first_unit;    // the group's first unit, batch · kv heads + kv head
};

}  // namespace vsa::cuda
