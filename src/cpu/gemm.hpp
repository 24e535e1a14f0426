// Small dense float matrix products for the CPU backend: the two products of
// attention per query block (S = Q·Kᵀ and O = P·V) become register-blocked
// outer products the compiler vectorizes, instead of one dot per (row, key).
#pragma once

#include <cstdint>
#include <vector>

namespace vsa::cpu {

// Tile of C computed per step: kGemmRows rows by kGemmCols columns. Callers
// size M and N as multiples of these (pad with zeros).
constexpr std::int64_t kGemmRows = 4;
constexpr std::int64_t kGemmCols = 16;

// How A is stored: row_major reads A[i, k] at a[i·lda + k]; col_major at
// a[k·lda + i] (A given as its transpose, as attention's P comes out).
enum class Layout2d { row_major, col_major };

// Whether C receives the product or has it added.
enum class Store { overwrite, add };

// C[M, N] (=|+=) alpha · A[M, K] · B[K, N]; B and C row-major with leading
// dimensions ldb, ldc. Accumulates in float, in the order k = 0, 1, ..., K-1.
template <Layout2d kA>
void gemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
          const float* b, std::int64_t ldb, float* c, std::int64_t ldc, Store store = Store::overwrite);

// The transpose of a row-major [rows, cols] matrix, as [cols, rows].
std::vector<float> transposed(const float* m, std::int64_t rows, std::int64_t cols);

}  // namespace vsa::cpu
