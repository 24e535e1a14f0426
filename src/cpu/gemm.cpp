#include "cpu/gemm.hpp"

namespace vsa::cpu {
namespace {

// 16 floats as one value: GCC/Clang vector extensions, lowered to one
// AVX-512 register, two AVX registers or four SSE registers per clone.
typedef float Row16 __attribute__((vector_size(kGemmCols * sizeof(float))));

// One 4x16 tile of C held in registers across the whole K loop: per k, one
// 16-wide row of B is loaded and four broadcasts of A feed 64 multiply-adds.
// Built for AVX-512 and AVX2 besides the baseline; the loader picks the best
// the CPU supports (GCC function multiversioning, dispatching on ISA features
// — "arch=" clones would dispatch on the exact CPU model), so the binary
// stays portable.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void gemm_tiles(bool a_col_major, bool add, std::int64_t m, std::int64_t n, std::int64_t k,
                float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                float* c, std::int64_t ldc) {
  // A[i, kk] = a[i·row_step + kk·k_step]
  const std::int64_t row_step = a_col_major ? 1 : lda, k_step = a_col_major ? lda : 1;
  for (std::int64_t i0 = 0; i0 < m; i0 += kGemmRows) {
    for (std::int64_t j0 = 0; j0 < n; j0 += kGemmCols) {
      Row16 acc[kGemmRows] = {};
      for (std::int64_t kk = 0; kk < k; ++kk) {
        Row16 brow;
        __builtin_memcpy(&brow, b + kk * ldb + j0, sizeof(brow));  // unaligned load
        for (std::int64_t i = 0; i < kGemmRows; ++i) acc[i] += a[(i0 + i) * row_step + kk * k_step] * brow;
      }
      for (std::int64_t i = 0; i < kGemmRows; ++i) {
        float* crow = c + (i0 + i) * ldc + j0;
        Row16 result = alpha * acc[i];
        if (add) {
          Row16 old;
          __builtin_memcpy(&old, crow, sizeof(old));
          result += old;
        }
        __builtin_memcpy(crow, &result, sizeof(result));
      }
    }
  }
}

}  // namespace

template <Layout2d kA>
void gemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
          const float* b, std::int64_t ldb, float* c, std::int64_t ldc, Store store) {
  gemm_tiles(kA == Layout2d::col_major, store == Store::add, m, n, k, alpha, a, lda, b, ldb, c, ldc);
}

std::vector<float> transposed(const float* m, std::int64_t rows, std::int64_t cols) {
  std::vector<float> t(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) t[c * rows + r] = m[r * cols + c];
  return t;
}

template void gemm<Layout2d::row_major>(std::int64_t, std::int64_t, std::int64_t, float, const float*,
                                        std::int64_t, const float*, std::int64_t, float*, std::int64_t, Store);
template void gemm<Layout2d::col_major>(std::int64_t, std::int64_t, std::int64_t, float, const float*,
                                        std::int64_t, const float*, std::int64_t, float*, std::int64_t, Store);

}  // namespace vsa::cpu
