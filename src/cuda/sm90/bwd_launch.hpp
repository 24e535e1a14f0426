// Host-visible declarations of the Hopper backward launchers
// (common/bwd_launchers.hpp); the kernel bodies are in bwd_kernel.cuh,
// bwd_dq_kernel.cuh and bwd_dq_stored_kernel.cuh.
#pragma once

#include "cuda/common/bwd_launchers.hpp"

namespace vsa::cuda::sm90 {

VSA_DECLARE_BWD_LAUNCHERS

// The stored-dS path's dQ pass: a CTA per 64-row query tile of the group's
// `query_heads` query heads (BwdKernelParams::ds_first_unit on).
template <class Elem, int kHeadDim>
void launch_bwd_dq_stored(const BwdKernelParams& p, int query_heads, cudaStream_t stream);
#define VSA_SM90_DQ_STORED_INSTANCE(Elem, D) \
  extern template void launch_bwd_dq_stored<Elem, D>(const BwdKernelParams&, int, cudaStream_t);
VSA_SM90_DQ_STORED_INSTANCE(__nv_bfloat16, 64)
VSA_SM90_DQ_STORED_INSTANCE(__nv_bfloat16, 128)
VSA_SM90_DQ_STORED_INSTANCE(__half, 64)
VSA_SM90_DQ_STORED_INSTANCE(__half, 128)
#undef VSA_SM90_DQ_STORED_INSTANCE

}  // namespace vsa::cuda::sm90
