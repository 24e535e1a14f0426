// Host-side facts the CUDA launchers read off validated tensors: whether
// every row starts 16-byte aligned (the kernels move rows in 16-byte
// pieces), and the element strides of (batch, head, sequence).
#pragma once

#include <cstdint>

#include "core/layout.hpp"
#include "cuda/common/kernel_params.hpp"

namespace vsa::cuda {

constexpr float kLog2e = 1.4426950408889634f;

inline bool rows_aligned(const TensorRef& t, Layout layout) {
  const detail::HeadView v = detail::head_view(t, layout);
  return reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0 && v.stride_batch % 8 == 0 && v.stride_head % 8 == 0 &&
         v.stride_seq % 8 == 0;
}

inline SeqStrides seq_strides(const TensorRef& t, Layout layout) {
  const detail::HeadView v = detail::head_view(t, layout);
  return SeqStrides{v.stride_batch, v.stride_head, v.stride_seq};
}

}  // namespace vsa::cuda
