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
//   (below), rounded to float32.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/host_device.hpp"

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
// A mean vector x (a query row's, or a key's) becomes integers Q_d =
// RN(x_d · 2^(kScoreBits − E)), E = floor(log2) of its largest finite |x_d|,
// so |Q_d| <= 2^22 and a query and a key's Σ_d Q_q,d Q_k,d is exact in 64
// bits (on the GPU exact in the integer tensor cores, from three 8-bit pieces
// each). A row ranks key j by that sum rounded once to float32 and scaled by
// 2^(E_q + E_j − 2·kScoreBits) (score_rank): the score, which its softmax
// then takes. Every step is integer
// arithmetic or one rounding to nearest (ties to even), the same on every
// backend whatever its floating-point modes.
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

VSA_HOST_DEVICE inline float float_of_bits(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

// |x|'s bits (ordered like |x| for finite x); above kInfBits when x is not finite.
constexpr std::uint32_t kInfBits = 0x7f800000u;
VSA_HOST_DEVICE inline std::uint32_t magnitude_bits(float x) { return float_bits(x) & 0x7fffffffu; }

// A vector's largest finite |x_d| as magnitude bits, and whether every x_d is
// finite, taken one element at a time (a GPU then combines its lanes' parts).
struct MagnitudeRange {
  std::uint32_t largest = 0;
  bool finite = true;
  VSA_HOST_DEVICE void add(float x) {
    const std::uint32_t mag = magnitude_bits(x);
    if (mag >= kInfBits)
      finite = false;
    else
      largest = largest < mag ? mag : largest;
  }
};

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

// RN(value / 2^shift), ties to even, for value < 2^24; shift <= 0 shifts left (exact).
VSA_HOST_DEVICE inline std::uint32_t shift_right_rounded(std::uint32_t value, int shift) {
  if (shift <= 0) return value << -shift;
  if (shift > 25) return 0;  // value < 2^24: less than half of 2^shift
  const std::uint32_t q = value >> shift, rest = value & ((1u << shift) - 1u), half = 1u << (shift - 1);
  return q + (rest > half || (rest == half && (q & 1u)) ? 1u : 0u);
}

// Q = RN(x · 2^(kScoreBits − exponent)) for a finite x with |x| < 2^(exponent + 1).
VSA_HOST_DEVICE inline std::int32_t quantize_mean(float x, int exponent) {
  const std::uint32_t bits = float_bits(x), mag = bits & 0x7fffffffu;
  const int field = static_cast<int>(mag >> 23);
  const std::uint32_t significand = field != 0 ? (mag & 0x7fffffu) | 0x800000u : mag;
  // x = significand · 2^(e − 23) with e = field − 127 (subnormal: −126), so Q =
  // RN(significand / 2^shift), shift = exponent + 23 − kScoreBits − e: >= 2 for a
  // normal x, down to −21 for a subnormal x of a vector whose largest element is
  // subnormal too (then Q is the significand shifted left, still below 2^22).
  const int shift = exponent + 23 - kScoreBits - (field != 0 ? field - 127 : -126);
  const auto q = static_cast<std::int32_t>(shift_right_rounded(significand, shift));
  return bits >> 31 ? -q : q;
}

// RN(a · b), subnormal results kept: the CUDA build's --use_fast_math would
// flush them in a plain product.
VSA_HOST_DEVICE inline float multiply_keep_subnormals(float a, float b) {
#if defined(__CUDA_ARCH__)
  float d;
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
#else
  return a * b;
#endif
}

VSA_HOST_DEVICE inline int clamp_exponent(int e, int low, int high) { return e < low ? low : (e > high ? high : e); }
VSA_HOST_DEVICE inline float power_of_two(int e) {  // 2^e for e in [−126, 127]
  return float_of_bits(static_cast<std::uint32_t>(e + 127) << 23);
}

// A row's score against a key is the exact sum Σ_d Q_q,d Q_k,d times 2^shift,
// shift = E_q + E_k − 2·kScoreBits, in [−340, 212].
VSA_HOST_DEVICE inline int score_shift(int query_exponent, int key_exponent) {
  return query_exponent + key_exponent - 2 * kScoreBits;
}

// 2^shift as two normal factors. The first takes the rounded sum (an integer, 0
// or in [1, 2^51]) exactly into [2^−126, 2^127] (its exponent is clamped to
// [−126, 76]); the second then rounds once: into the subnormals, to 0, or to
// inf. Where either clamp bites, the exact product rounds to 0 (it is below
// 2^−201) or to inf (above 2^203), and so does this one.
struct RankScale {
  float first, second;
};
VSA_HOST_DEVICE inline RankScale rank_scale(int shift) {
  const int first = clamp_exponent(shift, -126, 76);
  return {power_of_two(first), power_of_two(clamp_exponent(shift - first, -126, 127))};
}

// What a row ranks key j by, and what its softmax takes: the exact sum rounded
// to float32, then times 2^shift (exact where the result is a normal float;
// rounded to nearest once more where it is subnormal; 0 below float32's range
// and inf past it). So a row's order of its keys is exact wherever its scores
// are normal floats, however far apart its query mean and its key means sit in
// float32's range. Two multiplications and no branches (the GPU computes every
// score this way), in float32 only (FP64 is slow on consumer GPUs).
VSA_HOST_DEVICE inline float score_rank(std::int64_t sum, int shift) {
#if defined(__CUDA_ARCH__)
  const float rounded = __ll2float_rn(sum);
#else
  const float rounded = static_cast<float>(sum);  // round to nearest, the default mode
#endif
  const RankScale scale = rank_scale(shift);
  return multiply_keep_subnormals(multiply_keep_subnormals(rounded, scale.first), scale.second);
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
  std::uint32_t bits = float_bits(score);
  if (bits == 0x80000000u) bits = 0;
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

}  // namespace vsa::detail
