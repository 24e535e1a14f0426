// Warp specialization on Hopper: the register reallocation between a
// producer warpgroup (few registers) and consumer warpgroups (many), and the
// named barriers that synchronize one warpgroup without stopping the others.
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

// Hardware barrier `id` (1..15; 0 is __syncthreads) over `threads` threads.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// An arrival at barrier `id` that does not wait (the signalling side of a
// barrier whose other threads bar.sync on it).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace vsa::cuda::sm90
