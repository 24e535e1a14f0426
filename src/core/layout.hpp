// Reading q/k/v-shaped tensors the same way on every backend: logical
// (batch, head, seq) coordinates whatever the layout.
#pragma once

#include <cstdint>

#include "vsa/attention.hpp"

namespace vsa::detail {

// Logical extents and element strides of a [B, H, S, D] view, resolved from
// either layout. Unit stride on D is checked before this is used.
struct HeadView {
  std::int64_t batch, heads, seq, dim;
  std::int64_t stride_batch, stride_head, stride_seq;
};

inline HeadView head_view(const TensorRef& t, Layout layout) {
  const bool bshd = layout == Layout::bshd;
  const int seq_axis = bshd ? 1 : 2;
  const int head_axis = bshd ? 2 : 1;
  return HeadView{t.shape[0],      t.shape[head_axis], t.shape[seq_axis],  t.shape[3],
                  t.stride[0],     t.stride[head_axis], t.stride[seq_axis]};
}

inline std::int64_t element_offset(const HeadView& v, std::int64_t b, std::int64_t h,
                                   std::int64_t s) {
  return b * v.stride_batch + h * v.stride_head + s * v.stride_seq;
}

// Reads entry `i` of a contiguous int32/int64 host tensor as int64.
inline std::int64_t load_int(const TensorRef& t, std::int64_t i) {
  return t.dtype == DType::i64 ? static_cast<const std::int64_t*>(t.data)[i]
                               : static_cast<const std::int32_t*>(t.data)[i];
}

// Writes entry `i` of a contiguous int32/int64 host tensor.
inline void store_int(const TensorRef& t, std::int64_t i, std::int64_t value) {
  if (t.dtype == DType::i64)
    static_cast<std::int64_t*>(t.data)[i] = value;
  else
    static_cast<std::int32_t*>(t.data)[i] = static_cast<std::int32_t>(value);
}

}  // namespace vsa::detail
