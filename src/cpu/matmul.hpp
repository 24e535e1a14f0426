// The CPU backend's dense matrix products, run by OpenBLAS (docs/cpu-backend.md
// says why that library). Every call is single-threaded: the backend's own
// pool spreads work items (query or key blocks) over the threads, and each
// item's products run on the thread that owns it.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace vsa::cpu {

enum class Transpose : bool { no, yes };

// The largest size or leading dimension a product takes: OpenBLAS's interface
// passes them as blasint, an int in the builds vsa links (Debian's library and
// the scipy-openblas32 wheel). A larger value would wrap: OpenBLAS refuses a
// negative one (printing an error and leaving C as it was) and computes with
// a wrapped positive one, either way without telling the caller.
constexpr std::int64_t kMaxMatmulExtent = std::numeric_limits<int>::max();

// C[m, n] = alpha · op(A) · op(B) + beta · C, every matrix row-major with its
// leading dimension (elements between rows); op(A) is [m, k], op(B) [k, n].
// A given transposed is stored [k, m], B transposed [n, k]. Every size and
// leading dimension is at most kMaxMatmulExtent.
void matmul(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
            std::int64_t ldc);

// The library as it runs here: "OpenBLAS <version> (<kernels> kernels)".
std::string math_library();

}  // namespace vsa::cpu
