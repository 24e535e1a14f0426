// The arithmetic of the VSA layer that must give the same bits on every
// backend: block means and coarse selection scores. The CPU and CUDA code
// both call these functions, so the same inputs produce bit-identical means,
// scores and therefore block lists (docs/layer.md, "Precision"). Also the gate
// combine's step, shared by the combine pass and the fine kernels' fused
// epilogue so that both give the same bits on a backend.
//
// - Means: the 16-bit (or float32) inputs are summed in float64 in token
//   order and divided by the count in float64, then rounded once to float32.
// - Scores: a chain of fused multiply-adds in float32, d ascending, each step
//   rounded once (IEEE, subnormals kept: the CUDA code must not flush them
//   even where the rest of the kernel is built with --use_fast_math).
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

// acc + a * b with one rounding.
VSA_HOST_DEVICE inline float score_step(float a, float b, float acc) {
#if defined(__CUDA_ARCH__)
  return __fmaf_ieee_rn(a, b, acc);
#else
  return std::fma(a, b, acc);
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
