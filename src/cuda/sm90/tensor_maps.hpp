// Host side of the Hopper TMA loads: the tensor maps (TMA descriptors) of a
// forward's q, k and v through their element strides (either layout): q as a
// 4-D [B][H][S][D] tensor, k and v as 5-D [B][H][S / 64][64][D] tensors of
// 64-key tiles (request_key_tile), copied in boxes of 64 rows × 64 columns
// into the 128-byte-swizzled tiles that wgmma reads; and the backward key
// pass's q and dout as 5-D [B][H][D / 64][S][64] tensors, whose box is a
// whole [64][D] tile.
#pragma once

#include <cuda.h>

#include "cuda/common/kernel_params.hpp"

namespace vsa::cuda::sm90 {

struct FwdTensorMaps {  // each CUtensorMap is 64-byte aligned
  CUtensorMap q, k, v;
};

// Encodes the three maps for 16-bit elements (`is_bf16` or fp16). Returns
// false, with no error raised, when the driver refuses to describe a view
// (or has no encoder): the caller then runs the kernel that loads with
// cp.async. The views that reach here already have 16-byte aligned rows and
// strides (rows_aligned), which is what the driver documents it needs; no
// refusal has been observed yet. Host-only, no device synchronization.
bool encode_fwd_tensor_maps(const FwdKernelParams& p, bool is_bf16, int batch, int kv_heads, std::int64_t seq_q,
                            std::int64_t seq_kv, int head_dim, FwdTensorMaps& maps);

// The stored-dS key pass's q and dout maps ([B][H][D / 64][S][64], `batch` batches from the
// first: a box is a whole [64][D] tile), for its full query tiles (bwd_kernel.cuh). False as above, and also
// for a view whose base or strides TMA cannot take (these are not checked before): the key pass
// then copies every pair by cp.async.
struct BwdQueryMaps {
  CUtensorMap q, dout;
};
bool encode_bwd_query_maps(const BwdKernelParams& p, bool is_bf16, int batch, int head_dim, BwdQueryMaps& maps);

}  // namespace vsa::cuda::sm90
