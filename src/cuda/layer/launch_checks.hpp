// What the layer's CUDA kernels need of their tensors beyond the core's
// checks: 16-bit elements and rows that start 16-byte aligned (they move
// rows in 16-byte pieces). Unsupported otherwise, with the reason.
#pragma once

#include <string>

#include "cuda/tensor_views.hpp"
#include "vsa/error.hpp"

namespace vsa::cuda::layer {

inline void require_kernel_rows(const TensorRef& t, const char* name, Layout layout) {
  if (t.dtype != DType::bf16 && t.dtype != DType::f16)
    throw Error(ErrorKind::unsupported, std::string(name) + ".dtype",
                "bfloat16 or float16 on CUDA (float32 runs on the CPU backend)", dtype_name(t.dtype));
  if (!rows_aligned(t, layout))
    throw Error(ErrorKind::unsupported, std::string(name) + ".stride",
                "16-byte aligned rows on CUDA (data pointer aligned to 16 bytes, batch/head/sequence "
                "strides multiples of 8 elements)",
                "unaligned rows");
}

// Threads of the memory-bound kernels' CTAs, and the CTAs for `work` threads.
constexpr int kThreads = 256;
inline unsigned ctas_for(std::int64_t work) {
  return static_cast<unsigned>((work + kThreads - 1) / kThreads);
}

}  // namespace vsa::cuda::layer
