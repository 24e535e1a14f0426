// Warp specialization on Hopper: the register reallocation between a
// producer warpgroup (few registers) and consumer warpgroups (many). The
// named barriers that synchronize one warpgroup without stopping the others
// are ptx::named_barrier_sync / _arrive (common/ptx.cuh).
#pragma once

#include <cstdint>

namespace vsa::cuda::sm90 {

// Every warp of the warpgroup executes the same setmaxnreg; the counts are
// multiples of 8 in [24, 256].
template <int kRegisters>
__device__ __forceinline__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

}  // namespace vsa::cuda::sm90
