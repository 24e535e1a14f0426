// Settings and facts of the CPU backend.
#pragma once

#include <string>

namespace vsa {

// Threads the CPU backend's kernels use: a persistent pool of threads - 1
// workers plus the calling thread. 0 (the default) means the hardware's
// count. The environment variable VSA_NUM_THREADS, when set to a whole number
// in [1, 4096], overrides both; any other value of it is ignored (the calls
// run, with the count the setting or the hardware gives). Throws vsa::Error
// for a count outside [0, 4096].
void set_cpu_threads(int threads);

// The thread count the next CPU call will use.
int cpu_threads();

// What the CPU backend computes with, for reports: the math library that runs
// its matrix products (name, version, the kernels it dispatched to on this
// CPU) and the SIMD level of its own vector code (softmax exponentials).
struct CpuBackendInfo {
  std::string math_library;  // e.g. "OpenBLAS 0.3.21 (Zen kernels)"
  std::string simd;          // e.g. "avx2"
};
CpuBackendInfo cpu_backend_info();

}  // namespace vsa
