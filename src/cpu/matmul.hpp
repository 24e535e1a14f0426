// The CPU backend's dense matrix products, run by OpenBLAS (docs/cpu-backend.md
// says why that library). Every call is single-threaded: the backend's own
// pool spreads work items (query or key blocks) over the threads, and each
// item's products run on the thread that owns it.
#pragma once

#include <cstdint>
#include <string>

namespace vsa::cpu {

enum class Transpose : bool { no, yes };

// C[m, n] = alpha · op(A) · op(B) + beta · C, every matrix row-major with its
// leading dimension (elements between rows); op(A) is [m, k], op(B) [k, n].
// A given transposed is stored [k, m], B transposed [n, k].
void matmul(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
            std::int64_t ldc);

// The library as it runs here: "OpenBLAS <version> (<kernels> kernels)".
std::string math_library();

}  // namespace vsa::cpu
