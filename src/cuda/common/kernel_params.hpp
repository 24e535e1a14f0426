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

  int heads, kv_group;  // kv head = head / kv_group
  int num_q_blocks, max_kv, block;
  float scale_log2;  // softmax scale * log2(e): scores go straight into exp2
};

}  // namespace vsa::cuda
