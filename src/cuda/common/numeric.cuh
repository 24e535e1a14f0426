// The two 16-bit input types behind one interface: packing two fp32 values
// into the 32-bit register halves that mma.sync and 4-byte stores take, and
// unpacking such a pair back to fp32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace vsa::cuda {

template <class Elem>
struct ElemTraits;

template <>
struct ElemTraits<__nv_bfloat16> {
  static constexpr bool kIsBf16 = true;
  __device__ static std::uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<std::uint32_t*>(&v);
  }
  __device__ static float2 unpack(std::uint32_t bits) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits));
  }
};

template <>
struct ElemTraits<__half> {
  static constexpr bool kIsBf16 = false;
  __device__ static std::uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<std::uint32_t*>(&v);
  }
  __device__ static float2 unpack(std::uint32_t bits) { return __half22float2(*reinterpret_cast<const __half2*>(&bits)); }
};

}  // namespace vsa::cuda
