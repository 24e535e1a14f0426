// Eight consecutive 16-bit elements (one 16-byte load or store) as floats,
// and the offsets of q/k/v-shaped rows: the unit of work of the layer's
// memory-bound kernels (block means, gate combine).
#pragma once

#include <cstdint>

#include "cuda/common/kernel_params.hpp"
#include "cuda/common/numeric.cuh"

namespace vsa::cuda::layer {

template <class Elem>
__device__ __forceinline__ void unpack8(const uint4& raw, float (&out)[8]) {
  const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 pair = ElemTraits<Elem>::unpack(words[i]);
    out[2 * i] = pair.x;
    out[2 * i + 1] = pair.y;
  }
}

template <class Elem>
__device__ __forceinline__ void load8(const Elem* src, float (&out)[8]) {
  unpack8<Elem>(*reinterpret_cast<const uint4*>(src), out);
}

template <class Elem>
__device__ __forceinline__ void store8(Elem* dst, const float (&in)[8]) {
  uint4 raw;
  raw.x = ElemTraits<Elem>::pack(in[0], in[1]);
  raw.y = ElemTraits<Elem>::pack(in[2], in[3]);
  raw.z = ElemTraits<Elem>::pack(in[4], in[5]);
  raw.w = ElemTraits<Elem>::pack(in[6], in[7]);
  *reinterpret_cast<uint4*>(dst) = raw;
}

__device__ __forceinline__ void load8(const float* src, float (&out)[8]) {
  const float4 lo = *reinterpret_cast<const float4*>(src);
  const float4 hi = *reinterpret_cast<const float4*>(src + 4);
  out[0] = lo.x, out[1] = lo.y, out[2] = lo.z, out[3] = lo.w;
  out[4] = hi.x, out[5] = hi.y, out[6] = hi.z, out[7] = hi.w;
}

__device__ __forceinline__ void store8(float* dst, const float (&in)[8]) {
  *reinterpret_cast<float4*>(dst) = make_float4(in[0], in[1], in[2], in[3]);
  *reinterpret_cast<float4*>(dst + 4) = make_float4(in[4], in[5], in[6], in[7]);
}

// Element offset of token `seq` of (batch, head) in a strided q/k/v view.
__device__ __forceinline__ std::int64_t token_offset(const SeqStrides& st, std::int64_t batch,
                                                     std::int64_t head, std::int64_t seq) {
  return batch * st.batch + head * st.head + seq * st.seq;
}

__device__ __forceinline__ std::int64_t read_count(const void* counts, bool is_64, std::int64_t i) {
  return is_64 ? static_cast<const long long*>(counts)[i] : static_cast<const int*>(counts)[i];
}

}  // namespace vsa::cuda::layer
