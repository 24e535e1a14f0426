// The element types q/k/v may hold on the CPU and their conversions to and
// from float. Conversions to 16-bit types round to nearest, ties to even, as
// GPU hardware does, so CPU and GPU results differ only by accumulation order.
#pragma once

#include <bit>
#include <cstdint>

#include "vsa/tensor.hpp"

namespace vsa::cpu {

struct Bf16 {
  std::uint16_t bits;
};
struct Half {
  std::uint16_t bits;
};

// ---- bfloat16: the upper half of a float --------------------------------------

inline float bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

inline std::uint16_t float_to_bf16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u)  // NaN: keep the sign, force a quiet payload
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7fff plus the lowest kept bit rounds half-way cases to even.
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

// ---- IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits ------------

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu)  // inf or NaN
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0)  // normal: rebias 15 -> 127
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal half: mantissa * 2^-24, a normal float after shifting the
  // leading one into the implicit position.
  std::uint32_t float_exponent = 113;  // 2^-14, the exponent of the smallest normal half
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --float_exponent;
  }
  return std::bit_cast<float>(sign | (float_exponent << 23) | ((mantissa & 0x3ffu) << 13));
}

inline std::uint16_t float_to_half(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  const auto exponent = static_cast<std::int32_t>(magnitude >> 23) - 127;
  if (exponent > 15) return static_cast<std::uint16_t>(sign | 0x7c00u);  // inf or too large
  std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;       // 24 bits with the implicit one
  // Bits to drop from the 24-bit significand: 13 for normal halves, more for
  // subnormals (whose unit is 2^-24), everything below that.
  const std::int32_t shift = exponent >= -14 ? 13 : 13 + (-14 - exponent);
  if (shift > 24) return sign;  // below half the smallest subnormal: rounds to zero
  const std::uint32_t kept = significand >> shift;
  const std::uint32_t dropped = significand & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1);
  std::uint32_t rounded = kept + ((dropped > halfway || (dropped == halfway && (kept & 1u))) ? 1u : 0u);
  if (exponent >= -14) {
    // Normal: kept holds the implicit one at bit 10. A carry out of the
    // mantissa bumps the exponent, which is exactly what adding does.
    const auto biased = static_cast<std::uint32_t>(exponent + 15);
    rounded = (biased << 10) + (rounded - 0x400u);
    if (rounded >= 0x7c00u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  }
  // Subnormal: rounded is the mantissa; rounding up into 0x400 yields the
  // smallest normal, again exactly the right encoding.
  return static_cast<std::uint16_t>(sign | rounded);
}

// ---- uniform access for templated kernels ------------------------------------

inline float to_float(float x) { return x; }
inline float to_float(Bf16 x) { return bf16_to_float(x.bits); }
inline float to_float(Half x) { return half_to_float(x.bits); }

template <class T>
T from_float(float x);
template <>
inline float from_float<float>(float x) {
  return x;
}
template <>
inline Bf16 from_float<Bf16>(float x) {
  return Bf16{float_to_bf16(x)};
}
template <>
inline Half from_float<Half>(float x) {
  return Half{float_to_half(x)};
}

// Calls fn with a value of the element type stored under `dtype`, so one
// template serves every floating dtype: fn(Bf16{}), fn(Half{}) or fn(float{}).
// The dtype was validated before, so anything else is float32.
template <class Fn>
decltype(auto) with_element_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::bf16:
      return fn(Bf16{});
    case DType::f16:
      return fn(Half{});
    default:
      return fn(float{});
  }
}

}  // namespace vsa::cpu
