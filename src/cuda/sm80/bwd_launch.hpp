// Host-visible declarations of the portable backward launchers
// (common/bwd_launchers.hpp); the kernel bodies are in bwd_kernel.cuh and
// bwd_dq_stored_kernel.cuh.
#pragma once

#include "cuda/common/bwd_launchers.hpp"

namespace vsa::cuda::sm80 {

VSA_DECLARE_BWD_LAUNCHER(launch_bwd, int, int)
VSA_DECLARE_BWD_LAUNCHER(launch_bwd_dq_stored, int)

}  // namespace vsa::cuda::sm80
