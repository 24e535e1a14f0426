// Built with -ffast-math (CMakeLists.txt), for this file alone: glibc
// declares its vector exp2f only under it, and it lets the compiler
// reassociate the sum and the maximum into vector lanes. GCC's -fopenmp-simd
// makes the `omp simd` loops vector code at every optimization level (its -O2
// would leave them scalar). Each clone still adds in one fixed order, so
// results do not depend on the thread count.
#include "cpu/softmax_math.hpp"

#include <cmath>

namespace vsa::cpu {

// GCC function multiversioning on ISA features; the loader picks the best
// clone the CPU supports, so the binary stays portable.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define VSA_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VSA_SIMD_CLONES
#endif

VSA_SIMD_CLONES float row_max(const float* x, std::int64_t n) {
  float top = x[0];
#pragma omp simd reduction(max : top)
  for (std::int64_t i = 1; i < n; ++i) top = x[i] > top ? x[i] : top;  // GCC vectorizes this form, not std::max
  return top;
}

VSA_SIMD_CLONES float exp2_shifted(float* x, std::int64_t n, float shift) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (std::int64_t i = 0; i < n; ++i) {
    x[i] = exp2f(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

std::string simd_level() {
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return "avx512f";
  if (__builtin_cpu_supports("avx2")) return "avx2";
#endif
  return "baseline";
}

}  // namespace vsa::cpu
