// Built with its own flags (CMakeLists.txt). GCC's -fopenmp-simd makes the
// `omp simd` loops vector code at every optimization level (its -O2 would
// leave them scalar) and lets their sums and maxima run in vector lanes; each
// clone still adds in one fixed order, so results do not depend on the thread
// count. -ffinite-math-only -fno-signed-zeros let the exponential's clamps
// become single min/max instructions, and -fno-trapping-math lets its
// rounding and integer conversion vectorize; NaN is detected by a test on
// the bits, which those flags cannot remove.
//
// The exponential is computed inline (exp2_of below) rather than through
// glibc's vector exp2f: the call per 8 values spilled the running sum and
// cost about 2 cycles per value on Zen 3, a sixth of a forward work item;
// this loop takes about 0.9 (docs/cpu-backend.md, "Forward, 2026-12-01").
#include "cpu/softmax_math.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace vsa::cpu {

// GCC function multiversioning on ISA levels; the loader picks the best clone
// the CPU supports, so the binary stays portable. The x86-64-v3 and v4 levels
// (GCC 12 on) bring FMA with AVX2 and AVX-512, which the polynomial below
// uses, and v2 the SSE4.1 rounding that vectorizes its rint (plain SSE2 has
// none); older GCC gets clones by vector width alone. Not under
// ThreadSanitizer: GCC instruments the clones' ifunc resolver, which the
// loader runs while relocating, before TSan's runtime is set up, so any
// program linking a -fsanitize=thread build of vsa died before main.
#if defined(__SANITIZE_THREAD__)
#define VSA_SIMD_CLONES
#elif defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 12
#define VSA_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "arch=x86-64-v2", "default")))
#define VSA_SIMD_LEVEL_AVX512 "x86-64-v4"
#define VSA_SIMD_LEVEL_AVX2 "x86-64-v3"
#elif defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define VSA_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#define VSA_SIMD_LEVEL_AVX512 "avx512f"
#define VSA_SIMD_LEVEL_AVX2 "avx2"
#else
#define VSA_SIMD_CLONES
#endif

namespace {

// 2^t in float, within 1 ulp of the exact value for t in [-126, 127] when
// the polynomial's steps are fused multiply-adds (the x86-64-v3/v4 clones),
// 1.2 ulp when each step rounds twice (the v2 and default clones, other
// compilers)
// (tests/cpp/softmax_math_test.cpp checks it against double exp2); 0 below
// about -126.5 (most results under 2^-126 are flushed to zero), +inf from
// about 127.5 on (a shift that far below a score is no softmax's). NaN is
// the caller's business: the clamps turn it into -127 (exp2_shifted below).
// t = r + f with r = rint(t) and f in [-1/2, 1/2]: 2^f by a degree-6
// polynomial (a relative-error minimax fit with p(0) = 1 exactly, so a row's
// maximum always weighs 1), 2^r by building the float's exponent field.
inline float exp2_of(float t) {
  float c = t > -127.0f ? t : -127.0f;
  c = c < 128.0f ? c : 128.0f;
  const float r = std::rint(c);
  const float f = c - r;
  float p = 1.53533620e-4f;
  p = p * f + 1.33988738e-3f;
  p = p * f + 9.61843692e-3f;
  p = p * f + 5.55033237e-2f;
  p = p * f + 2.40226477e-1f;
  p = p * f + 6.93147182e-1f;
  p = p * f + 1.0f;
  // 2^r: exponent field r + 127, which is 0 (the float 0) at r = -127 and
  // 255 (+inf) at r = 128.
  return p * std::bit_cast<float>(static_cast<std::uint32_t>(static_cast<std::int32_t>(r) + 127) << 23);
}

bool is_nan(float x) {  // on the bits: -ffinite-math-only would fold x != x to false
  return (std::bit_cast<std::uint32_t>(x) & 0x7fffffffu) > 0x7f800000u;
}

}  // namespace

VSA_SIMD_CLONES float row_max(const float* x, std::int64_t n) {
  float top = x[0];
#pragma omp simd reduction(max : top)
  for (std::int64_t i = 1; i < n; ++i) top = x[i] > top ? x[i] : top;  // GCC vectorizes this form, not std::max
  return top;
}

VSA_SIMD_CLONES float exp2_shifted(float* x, std::int64_t n, float shift) {
  float sum = 0.0f;
  // The sum of the shifted values is NaN when one of them is (or when +inf
  // and -inf meet, which no usable scores do): then the row's softmax sum is
  // NaN, so is each of its probabilities, and that is what the row gets. One
  // add per value; a NaN test per value cost 1-2 % of a forward work item.
  float shifted_sum = 0.0f;
#pragma omp simd reduction(+ : sum, shifted_sum)
  for (std::int64_t i = 0; i < n; ++i) {
    const float t = x[i] - shift;
    shifted_sum += t;
    x[i] = exp2_of(t);
    sum += x[i];
  }
  if (!is_nan(shifted_sum)) return sum;
  const auto nan = std::bit_cast<float>(0x7fc00000u);  // quiet NaN, by its bits for the same reason as is_nan
  std::fill(x, x + n, nan);
  return nan;
}

std::string simd_level() {
#ifdef VSA_SIMD_LEVEL_AVX2
  // The clone the loader picked, named by its vector width.
  if (__builtin_cpu_supports(VSA_SIMD_LEVEL_AVX512)) return "avx512f";
  if (__builtin_cpu_supports(VSA_SIMD_LEVEL_AVX2)) return "avx2";
#endif
  return "baseline";
}

}  // namespace vsa::cpu
