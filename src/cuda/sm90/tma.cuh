// Hopper asynchronous copies and the barriers that track them: TMA tile loads
// (cp.async.bulk.tensor) described by a CUtensorMap, completing on a shared
// mbarrier that counts the bytes still to land ("transaction count").
//
// Where the consumer and the issuing thread are one warpgroup (v2), no
// full/empty protocol is needed: the warpgroup synchronizes before the
// issuing thread reuses a buffer. Where they are different warps (v3 and
// the kernel for 128-token blocks), each buffer has a "full" barrier (the
// copy's bytes) and an "empty" one (the consumers' arrivals once they are
// done reading). Each barrier flips its phase once per use, so a waiter for
// use u passes parity u & 1; a producer waits for "empty" with parity
// (u & 1) ^ 1, which a fresh barrier passes.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace vsa::cuda::sm90 {

__device__ __forceinline__ void mbarrier_init(std::uint32_t bar, std::uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
// Initialized barriers made visible to the TMA unit (the async proxy).
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// The issuing thread's arrival, announcing `bytes` that the copies will deliver.
__device__ __forceinline__ void mbarrier_expect_bytes(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// A plain arrival (no bytes): a consumer releasing the buffer the barrier guards.
__device__ __forceinline__ void mbarrier_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Blocks until the barrier's phase `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(std::uint32_t bar, std::uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap& map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(&map)) : "memory");
}

// One box of a 4-D tensor map, at element coordinates (c0 innermost), into
// shared memory at `dst`; its bytes count down the transaction count that
// mbarrier_expect_bytes announced on `bar`.
__device__ __forceinline__ void tma_load_4d(std::uint32_t dst, const CUtensorMap& map, std::uint32_t bar, int c0,
                                            int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(&map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// The same for a 5-D tensor map (the K and V maps: rows within a 64-key tile
// are their own dimension, so a negative row coordinate is out of bounds).
__device__ __forceinline__ void tma_load_5d(std::uint32_t dst, const CUtensorMap& map, std::uint32_t bar, int c0,
                                            int c1, int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, "
      "%7}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(&map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

// Bulk reductions: an fp32 array in shared memory added element by element
// into global memory by the TMA unit, issued by one thread. No register holds
// the data while it drains to L2, so the issuing warps go on at once; the
// source may be rewritten only after bulk_wait_read in the issuing thread.
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, std::uint32_t src, std::uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst), "r"(src),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// The committed bulk operations' shared-memory reads done (all but kPending groups).
template <int kPending>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}
// The committed bulk operations done, their global writes included.
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

}  // namespace vsa::cuda::sm90
