// Which forward kernel runs on a device: the one place that decides.
//
// sm_90 devices get the Hopper (wgmma) kernel when this build carries sm_90a
// code; every other device, and builds without it, the portable mma.sync
// kernel. The environment variable VSA_CUDA_KERNEL=sm80|sm90 overrides the
// choice (to test or benchmark the portable kernel on a Hopper GPU); asking
// for a kernel the device or build cannot run is an error, not a fallback.
#pragma once

namespace vsa::cuda {

enum class ForwardKernel { sm80, sm90 };

ForwardKernel forward_kernel_for(int compute_capability);

const char* forward_kernel_name(ForwardKernel k);

}  // namespace vsa::cuda
