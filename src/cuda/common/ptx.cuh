// Thin wrappers over the sm_80+ instructions the portable kernels use:
// cp.async (global -> shared without registers), ldmatrix (shared -> the
// register fragments of mma.sync), mma.sync m16n8k16, global float
// reductions, named barriers and the fast exp2.
#pragma once

#include <cstdint>

namespace vsa::cuda::ptx {

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte asynchronous copy; bypasses L1 (.cg) since tiles are used once per CTA.
__device__ __forceinline__ void cp_async_16(std::uint32_t dst_smem, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst_smem), "l"(src));
}
// The same copy, or 16 zero bytes when `copy` is false (a source size of 0:
// nothing is read from `src`).
__device__ __forceinline__ void cp_async_16_or_zero(std::uint32_t dst_smem, const void* src, bool copy) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst_smem), "l"(src), "r"(copy ? 16 : 0));
}
// 4-byte asynchronous copy (.ca: the only size .cg does not take).
__device__ __forceinline__ void cp_async_4(std::uint32_t dst_smem, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst_smem), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
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

// 16 zero bytes into shared memory.
__device__ __forceinline__ void st_shared_zero16(std::uint32_t dst_smem) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(dst_smem), "r"(0u) : "memory");
}

// Four bytes into shared memory.
__device__ __forceinline__ void st_shared_b32(std::uint32_t dst_smem, std::uint32_t value) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(dst_smem), "r"(value) : "memory");
}

// Four bytes from shared memory.
__device__ __forceinline__ std::uint32_t ld_shared_b32(std::uint32_t src_smem) {
  std::uint32_t r;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(r) : "r"(src_smem) : "memory");
  return r;
}

// Four floats (16 bytes) into shared memory.
__device__ __forceinline__ void st_shared_f32x4(std::uint32_t dst_smem, float x, float y, float z, float w) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst_smem), "f"(x), "f"(y), "f"(z), "f"(w)
               : "memory");
}

// A 16-byte load from shared memory into four registers.
__device__ __forceinline__ void ld_shared_b32x4(std::uint32_t (&r)[4], std::uint32_t src_smem) {
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(src_smem)
               : "memory");
}

// Four registers to global memory in one 16-byte store, streamed (.cs: its L2 lines are the
// first evicted), for data written once and read back much later.
__device__ __forceinline__ void st_global_streaming_b32x4(void* dst, const std::uint32_t (&r)[4]) {
  asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// The transpose of an 8 × 8 matrix of 16-bit elements held by a warp, one register a thread
// (lane l: row l / 4, columns 2·(l % 4) and + 1), returned in the same layout.
__device__ __forceinline__ std::uint32_t movmatrix_trans(std::uint32_t x) {
  std::uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// Four 8x8 b16 matrices; lane l supplies the row address of matrix l/8, row l%8.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D = A(16x16, row) * B(16x8, col) + D with fp32 accumulators.
template <bool kIsBf16>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const std::uint32_t (&a)[4],
                                            std::uint32_t b0, std::uint32_t b1) {
  if constexpr (kIsBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// *addr += (x, y, z, w) in global memory, without reading the result back:
// one 16-byte reduction on sm_90 and later, four 4-byte ones before.
__device__ __forceinline__ void red_add_f32x4(float* addr, float x, float y, float z, float w) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(addr), "f"(x), "f"(y), "f"(z), "f"(w)
               : "memory");
#else
  atomicAdd(addr, x);
  atomicAdd(addr + 1, y);
  atomicAdd(addr + 2, z);
  atomicAdd(addr + 3, w);
#endif
}

// 2^x with one MUFU instruction; exp2(-inf) = 0, which masking relies on.
__device__ __forceinline__ float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace vsa::cuda::ptx
