// Decisions drawn from the fuzzer's bytes. When the bytes run out,
// FuzzedDataProvider returns the low end of every range, so each helper puts
// the ordinary, valid choice there: short inputs describe valid calls, and
// the fuzzer has to spend bytes to break a rule.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <limits>
#include <vsa/vsa.hpp>

namespace vsa::fuzz {

// True about one time in 16.
inline bool rarely(FuzzedDataProvider& in) { return in.ConsumeIntegralInRange<int>(0, 15) == 15; }

// An int64 from the values where checks tend to slip, or any int64.
inline std::int64_t edgy_int64(FuzzedDataProvider& in) {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t min = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t values[] = {0,       1,          -1,          2,           3,         63,
                                     64,      65,         127,         128,         192,       256,
                                     1 << 16, (1ll << 31) - 1, 1ll << 31, 1ll << 32, 1ll << 62, max,
                                     min,     min + 1,    -64,         -128};
  return in.ConsumeBool() ? in.PickValueInArray(values) : in.ConsumeIntegral<std::int64_t>();
}

// Any dtype value, the enumerators first, then raw bytes past them.
inline DType any_dtype(FuzzedDataProvider& in) {
  if (!rarely(in))
    return in.PickValueInArray({DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64, DType::boolean});
  return static_cast<DType>(in.ConsumeIntegral<std::uint8_t>());
}

// A scale: the default (0), ordinary values, or ones the contract refuses.
inline float any_scale(FuzzedDataProvider& in) {
  if (!rarely(in)) return in.PickValueInArray({0.0f, 0.125f, 0.05f, 0.5f, 1.0f, 2.0f, -0.0f});
  return in.PickValueInArray({-1.0f, -0.125f, std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()});
}

}  // namespace vsa::fuzz
