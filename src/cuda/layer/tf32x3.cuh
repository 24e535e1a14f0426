// Float32 matrix products on the tensor cores, as three TF32 products
// (3xTF32): each operand x is split into hi = x truncated to TF32's 10
// mantissa bits and lo = x - hi (exact) truncated the same way, and a·b is
// taken as a_lo·b_hi + a_hi·b_lo + a_hi·b_hi, small terms first. |lo| <
// 2^-10 |x|, and what is dropped (a_lo·b_lo and the truncation of both lo) is
// below 3·2^-20 of |a·b|; the tensor core's own accumulation adds a few
// float32 roundings per product. Truncation by a mask is one instruction;
// cvt.rna.tf32.f32 is four on sm_90 (it handles inf and NaN).
// Not bit-identical to any fixed float32 order of operations: the coarse
// stage uses it for its output P·V, whose contract is a tolerance, never for
// the scores the lists come from.
#pragma once

#include <cstdint>

namespace vsa::cuda::tf32x3 {

struct Split {
  std::uint32_t hi, lo;
};

constexpr std::uint32_t kTf32Bits = 0xffffe000u;  // sign, exponent and the 10 mantissa bits TF32 keeps

__device__ __forceinline__ Split split(float x) {
  const std::uint32_t hi = __float_as_uint(x) & kTf32Bits;
  return {hi, __float_as_uint(x - __uint_as_float(hi)) & kTf32Bits};
}

// D += A(16x8, row) · B(8x8, col), TF32 inputs, float32 accumulators.
__device__ __forceinline__ void mma(float (&d)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                    std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The A fragment (16x8) and B fragment (8x8) of one m16n8k8 step, split.
struct FragA {
  Split x[4];
};
struct FragB {
  Split x[2];
};

// D += A · B to about float32 accuracy (three tensor-core products).
__device__ __forceinline__ void mma3(float (&d)[4], const FragA& a, const FragB& b) {
  mma(d, a.x[0].lo, a.x[1].lo, a.x[2].lo, a.x[3].lo, b.x[0].hi, b.x[1].hi);
  mma(d, a.x[0].hi, a.x[1].hi, a.x[2].hi, a.x[3].hi, b.x[0].lo, b.x[1].lo);
  mma(d, a.x[0].hi, a.x[1].hi, a.x[2].hi, a.x[3].hi, b.x[0].hi, b.x[1].hi);
}

// x rounded to TF32 (10 mantissa bits, to nearest, ties away from zero),
// returned as the bits an mma operand takes: for products whose operands are
// rounded once and used many times (the coarse stage's backward).
__device__ __forceinline__ std::uint32_t round_to_tf32(float x) {
  std::uint32_t y;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(y) : "f"(x));
  return y;
}

}  // namespace vsa::cuda::tf32x3
