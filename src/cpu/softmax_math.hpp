// The elementwise part of attention's softmax over rows of scores: the row
// maximum and the base-2 exponentials, vectorized by the compiler with one
// clone per x86 SIMD level picked at load time.
#pragma once

#include <cstdint>
#include <string>

namespace vsa::cpu {

// The largest of x[0, n); n > 0.
float row_max(const float* x, std::int64_t n);

// x[i] = 2^(x[i] - shift) for i in [0, n), within 1.25 ulp (1 with FMA) where that is a
// normal float; returns the sum of the new values. A NaN among the x[i] -
// shift (or +inf with -inf) makes every x[i] and the sum NaN: the row's
// softmax sum is NaN, and so is each of its probabilities.
float exp2_shifted(float* x, std::int64_t n, float shift);

// The SIMD level those clones run at on this CPU: "avx512f", "avx2" or
// "baseline" (SSE2 on x86-64; NEON on arm64, whose baseline it is).
std::string simd_level();

}  // namespace vsa::cpu
