// The arithmetic of the VSA layer that must give the same bits on every
// backend: block means and coarse selection scores. The CPU and CUDA code
// both call these functions, so the same inputs produce bit-identical means,
// scores and therefore block lists (docs/layer.md, "Precision"). Also the gate
// combine's step, shared by the combine pass and the fine kernels' fused
// epilogue so that both give the same bits on a backend.
//
// - Means: the 16-bit (or float32) inputs are summed in float64 in token
//   order and divided by the count in float64, then rounded once to float32.
// - Scores: exact integer dot products of the means in block floating point
//   (below), rounded once to float32.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define VSA_HOST_DEVICE __host__ __device__
#else
#define VSA_HOST_DEVICE
#endif

namespace vsa::detail {

VSA_HOST_DEVICE inline double mean_sum_step(double sum, float x) {
#if defined(__CUDA_ARCH__)
  // The conversion is spelled out: under --use_fast_math a cast would
  // flush subnormal inputs (cvt.ftz.f64.f32).
  double wide;
  asm("cvt.f64.f32 %0, %1;" : "=d"(wide) : "f"(x));
  return __dadd_rn(sum, wide);
#else
  return sum + static_cast<double>(x);
#endif
}

// The float32 mean of `count` values summed by mean_sum_step; 0 when empty.
VSA_HOST_DEVICE inline float mean_from_sum(double sum, std::int64_t count) {
  if (count <= 0) return 0.0f;
#if defined(__CUDA_ARCH__)
  float mean;  // cvt without .ftz, which --use_fast_math would add to a cast
  asm("cvt.rn.f32.f64 %0, %1;" : "=f"(mean) : "d"(__ddiv_rn(sum, static_cast<double>(count))));
  return mean;
#else
  return static_cast<float>(sum / static_cast<double>(count));
#endif
}

// ---- Scores: exact integer dot products of block-floating-point means ----
// A mean vector x becomes integers Q_d = RN(x_d · 2^(kScoreBits − E)), E =
// floor(log2) of the largest finite |x_d| that shares its exponent: each
// query row its own, all key means of a (batch, KV head) one. So |Q_d| <=
// 2^22, a query and a key vector's Σ_d Q_q,d Q_k,d is exact in 64 bits (and
// on the GPU exact in the integer tensor cores, from three 8-bit pieces
// each), and a row ranks its keys by that sum rounded once to float32. Every
// step is integer arithmetic or one IEEE rounding, the same on every backend.
constexpr int kScoreBits = 21;

VSA_HOST_DEVICE inline std::uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

// |x|'s bits (ordered like |x| for finite x); above kInfBits when x is not finite.
constexpr std::uint32_t kInfBits = 0x7f800000u;
VSA_HOST_DEVICE inline std::uint32_t magnitude_bits(float x) { return float_bits(x) & 0x7fffffffu; }

// floor(log2 |x|) from the magnitude bits of a finite nonzero x (subnormals
// included); 0 for x = 0 (its vector is all zeros: every Q_d is 0).
VSA_HOST_DEVICE inline int magnitude_exponent(std::uint32_t mag) {
  if (mag == 0) return 0;
  const int field = static_cast<int>(mag >> 23);
  if (field != 0) return field - 127;
#if defined(__CUDA_ARCH__)
  return 31 - __clz(static_cast<int>(mag)) - 149;
#else
  int top = 31;
  while (!(mag >> top)) --top;
  return top - 149;
#endif
}

// Q = RN(x · 2^(kScoreBits − exponent)), ties to even, for a finite x with
// |x| < 2^(exponent + 1). Exact shifts of x's significand, no float rounding.
VSA_HOST_DEVICE inline std::int32_t quantize_mean(float x, int exponent) {
  const std::uint32_t bits = float_bits(x), mag = bits & 0x7fffffffu;
  const int field = static_cast<int>(mag >> 23);
  const std::uint32_t significand = field != 0 ? (mag & 0x7fffffu) | 0x800000u : mag;
  // x = significand · 2^(e − 23) with e = field − 127 (subnormal: −126), so
  // Q = RN(significand / 2^shift), shift = exponent + 23 − kScoreBits − e:
  // >= 2 for a normal x; down to −21 for a subnormal x in a vector whose
  // largest element is subnormal too, where Q is the significand shifted
  // left, exactly (still below 2^22).
  const int shift = exponent + 23 - kScoreBits - (field != 0 ? field - 127 : -126);
  if (shift > 25) return 0;  // significand < 2^24: less than half of 2^shift
  std::uint32_t q;
  if (shift <= 0) {
    q = significand << -shift;
  } else {
    q = significand >> shift;
    const std::uint32_t rest = significand & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;
  }
  return bits >> 31 ? -static_cast<std::int32_t>(q) : static_cast<std::int32_t>(q);
}

// The exact sum Σ Q_q,d Q_k,d rounded once to float32: what a row ranks.
VSA_HOST_DEVICE inline float score_rank(std::int64_t sum) {
#if defined(__CUDA_ARCH__)
  return __ll2float_rn(sum);
#else
  return static_cast<float>(sum);  // round to nearest, the default mode
#endif
}

// One element of the gate combine: fine + coarse · gate with one rounding (an
// ungated combine passes gate 1: fma(c, 1, f) rounds the same exact sum as
// f + c, so it gives the same bits). On CUDA this is the plain fmaf of the
// --use_fast_math build (subnormals flushed), as the combine kernel always
// computed it: the same on both CUDA paths, not bit-identical to the CPU's.
VSA_HOST_DEVICE inline float combine_step(float fine, float coarse, float gate) {
#if defined(__CUDA_ARCH__)
  return fmaf(coarse, gate, fine);
#else
  return std::fma(coarse, gate, fine);
#endif
}

// An unsigned key whose order is the order of the scores (a larger score has
// a larger key); +0 and -0 get the same key. NaN keys sit above +inf, so both
// backends treat a NaN score alike.
VSA_HOST_DEVICE inline std::uint32_t score_key(float score) {
#if defined(__CUDA_ARCH__)
  std::uint32_t bits = __float_as_uint(score);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &score, sizeof bits);
#endif
  if (bits == 0x80000000u) bits = 0;
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

}  // namespace vsa::detail
