#include "cpu/matmul.hpp"

#include <cblas.h>

#include <mutex>
#include <sstream>

// OpenBLAS's symbols carry a prefix in the Python wheel's copy (scipy-openblas32
// names them scipy_cblas_sgemm, ...) so that it never clashes with another
// BLAS in the same process (torch's MKL, numpy's OpenBLAS). CMake defines
// VSA_BLAS_PREFIX: empty for the system library.
#define VSA_BLAS_CONCAT2(a, b) a##b
#define VSA_BLAS_CONCAT(a, b) VSA_BLAS_CONCAT2(a, b)
#define VSA_BLAS(name) VSA_BLAS_CONCAT(VSA_BLAS_PREFIX, name)

namespace vsa::cpu {
namespace {

// OpenBLAS's own threads would split each small product across cores that
// the backend's pool already keeps busy, and its pthread build serializes
// concurrent multi-threaded calls. Setting one thread is process-wide for this
// copy of OpenBLAS (the wheel's copy is private to vsa; a C++ engine linking
// the system OpenBLAS shares it: docs/cpu-backend.md).
void single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] { VSA_BLAS(openblas_set_num_threads)(1); });
}

CBLAS_TRANSPOSE cblas_transpose(Transpose t) { return t == Transpose::yes ? CblasTrans : CblasNoTrans; }

}  // namespace

void matmul(Transpose ta, Transpose tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
            std::int64_t ldc) {
  single_threaded_blas();
  VSA_BLAS(cblas_sgemm)(CblasRowMajor, cblas_transpose(ta), cblas_transpose(tb), static_cast<blasint>(m),
                        static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
                        static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

std::string math_library() {
  // get_config starts "OpenBLAS <version> ..."; the core names the kernels
  // OpenBLAS's run-time dispatch chose for this CPU.
  std::istringstream config(VSA_BLAS(openblas_get_config)());
  std::string name, version;
  config >> name >> version;
  return name + " " + version + " (" + VSA_BLAS(openblas_get_corename)() + " kernels)";
}

}  // namespace vsa::cpu
