// The CPU backend's bf16/fp16 conversions (an internal header): exhaustive
// agreement with the test's own decoders, and round-to-nearest-even stores.
#include "cpu/element_types.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "support/host_tensor.hpp"

namespace vsa::test {
namespace {

double decoded(DType dtype, std::uint16_t bits) { return decode_float(dtype, &bits); }

TEST(ElementTypes, DecodeEveryBitPatternLikeTheTest) {
  for (std::uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto b = static_cast<std::uint16_t>(bits);
    for (DType dtype : {DType::bf16, DType::f16}) {
      const double expected = decoded(dtype, b);
      const float actual = dtype == DType::bf16 ? cpu::bf16_to_float(b) : cpu::half_to_float(b);
      if (std::isnan(expected))
        ASSERT_TRUE(std::isnan(actual)) << std::hex << bits;
      else
        ASSERT_EQ(actual, expected) << std::hex << bits;
    }
  }
}

// The tests' own fp16 encoder keeps NaN and infinities (the backward fuzzer
// writes NaN into rows the contract lets hold anything).
TEST(ElementTypes, TestEncoderKeepsNonFiniteHalves) {
  std::uint16_t bits = 0;
  encode_float(DType::f16, std::nan(""), &bits);
  EXPECT_TRUE(std::isnan(decoded(DType::f16, bits))) << std::hex << bits;
  for (const double inf : {INFINITY, -INFINITY}) {
    encode_float(DType::f16, inf, &bits);
    EXPECT_EQ(decoded(DType::f16, bits), inf) << std::hex << bits;
  }
}

TEST(ElementTypes, EveryValueRoundTrips) {
  for (std::uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto b = static_cast<std::uint16_t>(bits);
    const float half = cpu::half_to_float(b), bf16 = cpu::bf16_to_float(b);
    if (std::isnan(half))
      ASSERT_TRUE(std::isnan(cpu::half_to_float(cpu::float_to_half(half))));
    else
      ASSERT_EQ(cpu::float_to_half(half), b) << std::hex << bits;
    if (std::isnan(bf16))
      ASSERT_TRUE(std::isnan(cpu::bf16_to_float(cpu::float_to_bf16(bf16))));
    else
      ASSERT_EQ(cpu::float_to_bf16(bf16), b) << std::hex << bits;
  }
}

TEST(ElementTypes, Bf16RoundsToNearestEven) {
  auto round = [](double x) { return cpu::bf16_to_float(cpu::float_to_bf16(static_cast<float>(x))); };
  const double ulp = std::ldexp(1.0, -7);            // spacing of bf16 in [1, 2)
  EXPECT_EQ(round(1.0 + ulp / 2), 1.0);              // tie, 1.0 is even
  EXPECT_EQ(round(1.0 + 1.5 * ulp), 1.0 + 2 * ulp);  // tie, up to even
  EXPECT_EQ(round(1.0 + 0.51 * ulp), 1.0 + ulp);     // above half
  EXPECT_EQ(round(-1.0 - 0.49 * ulp), -1.0);
  EXPECT_EQ(round(std::numeric_limits<float>::max()), INFINITY);
  EXPECT_TRUE(std::isnan(round(NAN)));
}

TEST(ElementTypes, HalfRoundsToNearestEven) {
  auto round = [](double x) { return cpu::half_to_float(cpu::float_to_half(static_cast<float>(x))); };
  const double ulp = std::ldexp(1.0, -10);
  EXPECT_EQ(round(1.0 + ulp / 2), 1.0);
  EXPECT_EQ(round(1.0 + 1.5 * ulp), 1.0 + 2 * ulp);
  EXPECT_EQ(round(2047.0 / 1024 + ulp / 2), 2.0);  // carry into the exponent
  EXPECT_EQ(round(65504.0), 65504.0);
  EXPECT_EQ(round(65519.0), 65504.0);
  EXPECT_EQ(round(65520.0), INFINITY);       // tie between 65504 and 65536 goes to even: overflow
  const double tiny = std::ldexp(1.0, -24);  // smallest subnormal
  EXPECT_EQ(round(tiny), tiny);
  EXPECT_EQ(round(tiny / 2), 0.0);         // tie, 0 is even
  EXPECT_EQ(round(1.5 * tiny), 2 * tiny);  // tie, up to even
  EXPECT_EQ(round(0.75 * tiny), tiny);
  EXPECT_EQ(round(std::ldexp(1023.5, -24)), std::ldexp(1.0, -14));  // subnormal rounds up to normal
  EXPECT_EQ(round(1e-30), 0.0);
  EXPECT_TRUE(std::signbit(round(-1e-30)));
  EXPECT_TRUE(std::isnan(round(NAN)));
  EXPECT_EQ(round(-INFINITY), -INFINITY);
}

}  // namespace
}  // namespace vsa::test
