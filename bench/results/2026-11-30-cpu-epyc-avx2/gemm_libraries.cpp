// Single-threaded sgemm rate of each candidate library on the shapes of one CPU forward work item
// (64 query rows, `keys` gathered keys, head dim D), called the way the backend's pool calls it.
// Build one binary per library (-DUSE_OPENBLAS, -DUSE_BLIS, -DUSE_EIGEN, -DUSE_DNNL); see README.md.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <functional>
#include <string>
#ifdef USE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif
#ifdef USE_BLIS
#include <blis.h>
#endif
#ifdef USE_EIGEN
#include <Eigen/Dense>
#endif
#ifdef USE_DNNL
#include <dnnl.h>
#endif
using Clock = std::chrono::steady_clock;
// C[m, n] = op(A)·op(B), every matrix row-major.
static void gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
#ifdef USE_OPENBLAS
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
#elif defined(USE_BLIS)
  static thread_local rntm_t rntm = [] { rntm_t r = BLIS_RNTM_INITIALIZER; bli_rntm_set_num_threads_only(1, &r); return r; }();
  float one = 1, zero = 0;
  // row-major: rs = ld, cs = 1
  bli_sgemm_ex(ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, m, n, k, &one,
               (float*)a, lda, 1, (float*)b, ldb, 1, &zero, c, ldc, 1, nullptr, &rntm);
#elif defined(USE_EIGEN)
  using RM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using S = Eigen::OuterStride<>;
  Eigen::Map<RM, 0, S> C(c, m, n, S(ldc));
  if (!ta && tb) { Eigen::Map<const RM, 0, S> A(a, m, k, S(lda)); Eigen::Map<const RM, 0, S> B(b, n, k, S(ldb)); C.noalias() = A * B.transpose(); }
  else if (ta && !tb) { Eigen::Map<const RM, 0, S> A(a, k, m, S(lda)); Eigen::Map<const RM, 0, S> B(b, k, n, S(ldb)); C.noalias() = A.transpose() * B; }
  else { Eigen::Map<const RM, 0, S> A(a, m, k, S(lda)); Eigen::Map<const RM, 0, S> B(b, k, n, S(ldb)); C.noalias() = A * B; }
#elif defined(USE_DNNL)
  dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
#endif
}
int main(int argc, char** argv) {
#ifdef USE_OPENBLAS
  openblas_set_num_threads(1);
#endif
#ifdef USE_EIGEN
  Eigen::setNbThreads(1);
#endif
  int D = argc > 1 ? atoi(argv[1]) : 64;
  int keys = argc > 2 ? atoi(argv[2]) : 768;
  int rows = 64;
  double secs = 0.7;
  struct Shape { const char* name; bool ta, tb; int m, n, k; };
  // S = Q·Kᵀ [rows, keys] and O = P·V [rows, D]: the two products of one forward work item.
  Shape shapes[] = {{"S=Q.K^T", false, true, rows, keys, D}, {"O=P.V", false, false, rows, D, keys}};
  for (auto& s : shapes) {
    for (int threads : {1}) {
      std::vector<double> rate(threads);
      auto work = [&](int t) {
        std::vector<float> a(size_t(s.m) * s.k + 64), b(size_t(s.k) * s.n + 64), c(size_t(s.m) * s.n);
        for (auto& x : a) x = float(rand() % 100) / 100; for (auto& x : b) x = float(rand() % 100) / 100;
        int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
        for (int i = 0; i < 3; ++i) gemm(s.ta, s.tb, s.m, s.n, s.k, a.data(), lda, b.data(), ldb, c.data(), s.n);
        auto t0 = Clock::now(); long n = 0; double el;
        do { for (int i = 0; i < 10; ++i) gemm(s.ta, s.tb, s.m, s.n, s.k, a.data(), lda, b.data(), ldb, c.data(), s.n); n += 10;
             el = std::chrono::duration<double>(Clock::now() - t0).count(); } while (el < secs);
        rate[t] = 2.0 * s.m * s.n * s.k * n / el / 1e9;
      };
      std::vector<std::thread> th; for (int t = 1; t < threads; ++t) th.emplace_back(work, t); work(0); for (auto& x : th) x.join();
      double tot = 0; for (double r : rate) tot += r;
      printf("%-8s D%-3d keys%-5d %-10s threads %d: %6.1f GFLOP/s total\n", LIB, D, keys, s.name, threads, tot);
    }
  }
}
