// Hopper (sm_90a) warpgroup matrix products: wgmma.mma_async with bf16/fp16
// inputs and fp32 accumulators, the shared-memory matrix descriptors they
// read, and the fences around them.
//
// Shared layout the descriptors describe (the 128-byte swizzle): a tile is
// stored as column blocks of 64 elements (128 bytes); within a block, row r
// is 128 contiguous bytes and its 16-byte chunk c sits at chunk c ^ (r % 8).
// Blocks must start on 1024-byte boundaries.
#pragma once

#include <cstdint>

namespace vsa::cuda::sm90 {

// A wgmma shared-memory matrix descriptor (PTX ISA "Matrix Descriptor
// Format"): start address, leading and stride byte offsets (all >> 4), and
// the swizzle mode in bits 62-63 (1 = 128-byte swizzle).
__device__ __forceinline__ std::uint64_t smem_desc(std::uint32_t smem_addr, std::uint32_t leading_bytes,
                                                   std::uint32_t stride_bytes) {
  return static_cast<std::uint64_t>((smem_addr >> 4) & 0x3FFF) |
         static_cast<std::uint64_t>((leading_bytes >> 4) & 0x3FFF) << 16 |
         static_cast<std::uint64_t>((stride_bytes >> 4) & 0x3FFF) << 32 | (std::uint64_t{1} << 62);
}

// The descriptor of the matrix `bytes` further on: only the start address
// moves. Every shared address is below 2^18 (a CTA's window is under
// 228 KB), so the sum stays inside the 14-bit field of the low word.
// Computing a tile's descriptor once and advancing it per k-step takes the
// shift and masks out of each step (fewer instructions; no measured change
// in time).
__device__ __forceinline__ std::uint64_t desc_advance(std::uint64_t desc, std::uint32_t bytes) {
  const std::uint32_t low = static_cast<std::uint32_t>(desc) + (bytes >> 4);
  return (desc & ~std::uint64_t{0xFFFFFFFFu}) | low;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Generic-proxy writes to shared memory (cp.async, st.shared) made visible
// to the async proxy that wgmma reads through.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Pins accumulator registers in place across an asynchronous wgmma: the
// compiler may not move their reads or writes across this point.
template <int kN>
__device__ __forceinline__ void fence_registers(float (&r)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// Operand lists of the accumulator fragments (N/2 floats per thread): the
// register list inside the instruction and the matching asm outputs.
#define VSA_WGMMA_D8 "{%0,%1,%2,%3,%4,%5,%6,%7}"
#define VSA_WGMMA_D16 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}"
#define VSA_WGMMA_D32 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define VSA_WGMMA_D64 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define VSA_WGMMA_OUT8(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define VSA_WGMMA_OUT16(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define VSA_WGMMA_OUT32(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define VSA_WGMMA_OUT64(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define VSA_WGMMA_TYPES_true ".f32.bf16.bf16"
#define VSA_WGMMA_TYPES_false ".f32.f16.f16"

// One wgmma with both operands from shared memory, bf16 or fp16 (kIsBf16):
// the accumulator list, then the operand numbers of desc_a, desc_b, accumulate
// and the two transpose flags, which follow the N/2 outputs.
#define VSA_WGMMA_SS_ASM(shape, types, dlist, a, b, acc, ta, tb)  \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %" acc ", 0;\n"                \
  "wgmma.mma_async.sync.aligned." shape types " " dlist ", %" a ", %" b ", p, 1, 1, %" ta ", %" tb ";\n}\n"
#define VSA_WGMMA_SS(shape, dlist, outs, a, b, acc, ta, tb)                                            \
  if constexpr (kIsBf16)                                                                               \
    asm volatile(VSA_WGMMA_SS_ASM(shape, VSA_WGMMA_TYPES_true, dlist, a, b, acc, ta, tb)              \
                 : outs(d)                                                                             \
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransA), "n"(kTransB));            \
  else                                                                                                 \
    asm volatile(VSA_WGMMA_SS_ASM(shape, VSA_WGMMA_TYPES_false, dlist, a, b, acc, ta, tb)             \
                 : outs(d)                                                                             \
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransA), "n"(kTransB));

// D(64 x N) (+)= A(64 x 16) · B(16 x N), both from shared memory. kMnMajor
// false: A and B K-major (S = Q·Kᵀ); true: both MN-major, i.e. stored with
// the reduction dimension along rows (dQ = dS·K from dSᵀ and K tiles); the
// transpose flags are immediates. accumulate = 0 overwrites D. N = 16 and 32
// serve the tiles of partial blocks (a B operand of their real rows only).
template <bool kIsBf16, int kN, bool kMnMajor = false>
__device__ __forceinline__ void wgmma_ss(float (&d)[kN / 2], std::uint64_t desc_a, std::uint64_t desc_b,
                                         int accumulate) {
  static_assert(kN == 16 || kN == 32 || kN == 64 || kN == 128, "m64n16, m64n32, m64n64 or m64n128");
  constexpr int kTransA = kMnMajor ? 1 : 0, kTransB = kTransA;
  if constexpr (kN == 16) {
    VSA_WGMMA_SS("m64n16k16", VSA_WGMMA_D8, VSA_WGMMA_OUT8, "8", "9", "10", "11", "12")
  } else if constexpr (kN == 32) {
    VSA_WGMMA_SS("m64n32k16", VSA_WGMMA_D16, VSA_WGMMA_OUT16, "16", "17", "18", "19", "20")
  } else if constexpr (kN == 64) {
    VSA_WGMMA_SS("m64n64k16", VSA_WGMMA_D32, VSA_WGMMA_OUT32, "32", "33", "34", "35", "36")
  } else {
    VSA_WGMMA_SS("m64n128k16", VSA_WGMMA_D64, VSA_WGMMA_OUT64, "64", "65", "66", "67", "68")
  }
}
#undef VSA_WGMMA_SS
#undef VSA_WGMMA_SS_ASM

// D(64 x N) += A(64 x 16, registers) · B(16 x N), B MN-major in shared memory
// (O += P·V with V stored [keys][D]: the transpose flag of B is set).
template <bool kIsBf16, int kN>
__device__ __forceinline__ void wgmma_rs(float (&d)[kN / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b,
                                         int accumulate);

template <>
__device__ __forceinline__ void wgmma_rs<true, 64>(float (&d)[32], const std::uint32_t (&a)[4],
                                                       std::uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16" VSA_WGMMA_TYPES_true " " VSA_WGMMA_D32 ", {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
      : VSA_WGMMA_OUT32(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_rs<false, 64>(float (&d)[32], const std::uint32_t (&a)[4],
                                                       std::uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16" VSA_WGMMA_TYPES_false " " VSA_WGMMA_D32 ", {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
      : VSA_WGMMA_OUT32(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_rs<true, 128>(float (&d)[64], const std::uint32_t (&a)[4],
                                                       std::uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16" VSA_WGMMA_TYPES_true " " VSA_WGMMA_D64 ", {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
      : VSA_WGMMA_OUT64(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_rs<false, 128>(float (&d)[64], const std::uint32_t (&a)[4],
                                                       std::uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16" VSA_WGMMA_TYPES_false " " VSA_WGMMA_D64 ", {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
      : VSA_WGMMA_OUT64(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

#undef VSA_WGMMA_D8
#undef VSA_WGMMA_D16
#undef VSA_WGMMA_D32
#undef VSA_WGMMA_D64
#undef VSA_WGMMA_OUT8
#undef VSA_WGMMA_OUT16
#undef VSA_WGMMA_OUT32
#undef VSA_WGMMA_OUT64
#undef VSA_WGMMA_TYPES_true
#undef VSA_WGMMA_TYPES_false

}  // namespace vsa::cuda::sm90
