// Typed access to the D-element rows of q/k/v-shaped tensors, whatever their
// layout and strides, and conversion of those rows to and from float.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/layout.hpp"
#include "cpu/element_types.hpp"

namespace vsa::cpu {

// T is the element type, const-qualified for tensors that are only read.
template <class T>
struct SequenceRows {
  T* data;
  detail::HeadView view;

  T* row(std::int64_t batch, std::int64_t head, std::int64_t seq) const {
    return data + detail::element_offset(view, batch, head, seq);
  }
};

template <class T>
SequenceRows<T> sequence_rows(const TensorRef& t, Layout layout) {
  return SequenceRows<T>{static_cast<T*>(t.data), detail::head_view(t, layout)};
}

template <class T>
void load_row(const T* src, float* dst, std::int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
  else
    for (std::int64_t d = 0; d < n; ++d) dst[d] = to_float(src[d]);
}

template <class T>
void store_row(const float* src, T* dst, std::int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
  else
    for (std::int64_t d = 0; d < n; ++d) dst[d] = from_float<T>(src[d]);
}

inline float dot(const float* a, const float* b, std::int64_t n) {
  // Independent partial sums let the compiler vectorize the reduction
  // without -ffast-math (a single running sum fixes the order of additions).
  constexpr int kLanes = 8;
  float partial[kLanes] = {};
  std::int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes)
    for (int lane = 0; lane < kLanes; ++lane) partial[lane] += a[d + lane] * b[d + lane];
  float sum = 0.0f;
  for (; d < n; ++d) sum += a[d] * b[d];
  for (float p : partial) sum += p;
  return sum;
}

}  // namespace vsa::cpu
