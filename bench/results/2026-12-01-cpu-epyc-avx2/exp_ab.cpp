// One thread, in one process: the CPU forward's work items on the cpu-wan-crop shape (B1 H2
// D64, the case's 60 block sizes, 12 random blocks per query block), with the softmax's
// exponential before this change (glibc's vector exp2f, the loop of main's softmax_math.cpp)
// and after it (src/cpu/softmax_math.cpp), alternating pass by pass, so that both see the
// same machine load. Prints the cycles (TSC) of all passes of each and their ratio.
//
// Build in this folder (the Python package's OpenBLAS; the old loop needs -ffast-math, the
// only way glibc declares its vector exp2f; the new file takes its flags from CMakeLists.txt):
//   W=$(python -c "import os, scipy_openblas32 as s; print(os.path.dirname(s.get_include_dir()))")
//   g++ -O2 -ffast-math -fopenmp-simd -DOLD_EXP -c exp_ab.cpp -o old_exp.o
//   g++ -O2 -std=gnu++20 -ffinite-math-only -fno-signed-zeros -fno-trapping-math \
//       -ffp-contract=fast -fopenmp-simd -I../../../src -c ../../../src/cpu/softmax_math.cpp
//   g++ -O2 -std=gnu++20 -I$W/include -I../../../src exp_ab.cpp old_exp.o softmax_math.o \
//       -L$W/lib -lscipy_openblas -Wl,-rpath,$W/lib -o exp_ab && ./exp_ab 40
#include <cmath>
#include <cstdint>

#ifdef OLD_EXP
// main's exp2_shifted (1b36ddf), avx2 clone only.
__attribute__((target("avx2,fma"))) float old_exp2_shifted(float* x, std::int64_t n, float shift) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (std::int64_t i = 0; i < n; ++i) {
    x[i] = exp2f(x[i] - shift);
    sum += x[i];
  }
  return sum;
}
#else
#include <cblas.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/softmax_math.hpp"

float old_exp2_shifted(float* x, std::int64_t n, float shift);

namespace {

constexpr int kBlocks = 60, kBlock = 64, kDim = 64, kTopk = 12, kHeads = 2;
constexpr int kValid[kBlocks] = {64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 32, 32, 32, 32, 32,
                                 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 32, 32, 32, 32, 32,
                                 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 8,  8,  8,  8,  8};

}  // namespace

int main(int argc, char** argv) {
  const int passes = argc > 1 ? std::atoi(argv[1]) : 40;
  scipy_openblas_set_num_threads(1);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  const std::size_t size = std::size_t{kHeads} * kBlocks * kBlock * kDim;
  std::vector<float> q(size), k(size), v(size), out(size);
  for (auto* t : {&q, &k, &v})
    for (float& x : *t) x = normal(rng);
  std::vector<int> lists(kHeads * kBlocks * kTopk);
  for (int row = 0; row < kHeads * kBlocks; ++row) {
    std::vector<int> order(kBlocks);
    for (int j = 0; j < kBlocks; ++j) order[j] = j;
    std::shuffle(order.begin(), order.end(), rng);
    std::copy(order.begin(), order.begin() + kTopk, lists.begin() + row * kTopk);
  }
  std::vector<float> keys(kBlocks * kBlock * kDim), values(keys.size()), scores(kBlock * kBlocks * kBlock);
  std::vector<float> inv_sum(kBlock);
  const float scale_log2 = 1.4426950408889634f / 8.0f;
  double cycles[2] = {};
  for (int pass = 0; pass < 2 * passes + 2; ++pass) {
    const bool after = pass % 2 == 1;
    const unsigned long long start = __rdtsc();
    for (int item = 0; item < kHeads * kBlocks; ++item) {
      const int head = item / kBlocks;
      const float* kh = &k[std::size_t(head) * kBlocks * kBlock * kDim];
      const float* vh = &v[std::size_t(head) * kBlocks * kBlock * kDim];
      int count = 0;
      for (int e = 0; e < kTopk; ++e) {
        const int block = lists[item * kTopk + e], valid = kValid[block];
        std::memcpy(&keys[count * kDim], kh + block * kBlock * kDim, sizeof(float) * valid * kDim);
        std::memcpy(&values[count * kDim], vh + block * kBlock * kDim, sizeof(float) * valid * kDim);
        count += valid;
      }
      scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kBlock, count, kDim, scale_log2,
                        &q[std::size_t(item) * kBlock * kDim], kDim, keys.data(), kDim, 0.0f, scores.data(), count);
      for (int r = 0; r < kBlock; ++r) {
        float* row = &scores[r * count];
        const float top = vsa::cpu::row_max(row, count);
        inv_sum[r] = 1.0f / (after ? vsa::cpu::exp2_shifted(row, count, top) : old_exp2_shifted(row, count, top));
      }
      float* o = &out[std::size_t(item) * kBlock * kDim];
      scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kBlock, kDim, count, 1.0f, scores.data(), count,
                        values.data(), kDim, 0.0f, o, kDim);
      for (int r = 0; r < kBlock; ++r)
        for (int x = 0; x < kDim; ++x) o[r * kDim + x] *= inv_sum[r];
    }
    if (pass >= 2) cycles[after] += double(__rdtsc() - start);  // the first pass of each warms up
  }
  std::printf("%d passes of 120 items: before %.0f Mcycles, after %.0f Mcycles, after / before %.3f\n", passes,
              cycles[0] / 1e6, cycles[1] / 1e6, cycles[1] / cycles[0]);
}
#endif
