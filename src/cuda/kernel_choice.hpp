// Which attention kernels run on a device: the one place that decides, for
// the forward and the backward alike.
//
// sm_90 devices get the Hopper (wgmma) kernels when this build carries sm_90a
// code; every other device, and builds without it, the portable mma.sync
// kernels. The environment variable VSA_CUDA_KERNEL=sm80|sm90 overrides the
// choice (to test or benchmark the portable kernels on a Hopper GPU); asking
// for a kernel the device or build cannot run is an error, not a fallback.
#pragma once

namespace vsa::cuda {

enum class KernelFamily { sm80, sm90 };

KernelFamily kernel_family_for(int compute_capability);

const char* kernel_family_name(KernelFamily k);

}  // namespace vsa::cuda
