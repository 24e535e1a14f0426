// What the layer's CUDA kernels need of their tensors beyond the core's
// checks: 16-bit elements, and rows and float32 block tensors that start
// 16-byte aligned (they move data in 16-byte pieces). Unsupported otherwise,
// with the reason.
#pragma once

#include <cstdint>
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

// A contiguous float32 block tensor ([B, H, N, D], D a multiple of 8) read
// or written in 16-byte vectors: its data pointer must be 16-byte aligned.
inline void require_aligned_blocks(const TensorRef& t, const char* name) {
  if (reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0)
    throw Error(ErrorKind::unsupported, std::string(name) + ".data", "a 16-byte aligned pointer on CUDA",
                "an unaligned pointer");
}

// Threads of the memory-bound kernels' CTAs, and the CTAs for `work` threads.
constexpr int kThreads = 256;
inline unsigned ctas_for(std::int64_t work) {
  return static_cast<unsigned>((work + kThreads - 1) / kThreads);
}

}  // namespace vsa::cuda::layer
