// The coarse scores' arithmetic (core/layer_arithmetic.hpp) against
// independent references: the block-floating-point integers against
// ldexp + nearbyint in float64 (both exact here), and the ranked score
// against the exact product sum of those integers, scaled in float64.
#include "core/layer_arithmetic.hpp"

#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "support/test_seed.hpp"

namespace vsa {
namespace {

// RN(x · 2^(kScoreBits − exponent)) in float64: the scaling is exact (x has 24 significant
// bits, the product stays in float64's range) and nearbyint rounds to even.
std::int32_t reference_quantized(float x, int exponent) {
  return static_cast<std::int32_t>(std::nearbyint(std::ldexp(static_cast<double>(x), detail::kScoreBits - exponent)));
}

// floor(log2 |x|) of a finite nonzero x, from frexp.
int reference_exponent(float x) {
  int e = 0;
  std::frexp(static_cast<double>(x), &e);
  return e - 1;
}

float random_float(std::mt19937_64& rng) {
  // Any finite bit pattern: normals of every exponent, subnormals, zeros.
  for (;;) {
    const auto bits = static_cast<std::uint32_t>(rng());
    float x;
    std::memcpy(&x, &bits, sizeof x);
    if (std::isfinite(x)) return x;
  }
}

TEST(ScoreArithmetic, MagnitudeExponentIsFloorLog2) {
  std::mt19937_64 rng(test::next_seed());
  EXPECT_EQ(detail::magnitude_exponent(0), 0);
  for (const float x : {1.0f, 1.5f, 2.0f, 0.75f, std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                        std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min() / 3.0f})
    EXPECT_EQ(detail::magnitude_exponent(detail::magnitude_bits(x)), reference_exponent(x)) << x;
  for (int i = 0; i < 100000; ++i) {
    const float x = random_float(rng);
    if (x == 0.0f) continue;
    ASSERT_EQ(detail::magnitude_exponent(detail::magnitude_bits(x)), reference_exponent(x)) << x;
  }
}

TEST(ScoreArithmetic, QuantizedMeanRoundsToNearestEven) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  std::mt19937_64 rng(test::next_seed());
  // Exact halves at the rounding point, both parities: x · 2^(21 − E) = n + 0.5.
  for (const float x : {1.0f + 0x1p-22f, 1.0f + 3 * 0x1p-22f, -(1.0f + 0x1p-22f), 1.9999999f, 1.0f, -1.0f, 0.0f})
    EXPECT_EQ(detail::quantize_mean(x, 0), reference_quantized(x, 0)) << x;
  for (int i = 0; i < 200000; ++i) {
    const float largest = random_float(rng);
    if (largest == 0.0f) continue;
    const int exponent = reference_exponent(largest);
    // An element of a vector whose largest magnitude is |largest|.
    const float element =
        i % 3 == 0 ? largest : largest * static_cast<float>(std::uniform_real_distribution<double>(-1.0, 1.0)(rng));
    const std::int32_t q = detail::quantize_mean(element, exponent);
    ASSERT_EQ(q, reference_quantized(element, exponent)) << element << " at exponent " << exponent;
    ASSERT_LE(std::abs(q), 1 << (detail::kScoreBits + 1));
  }
}

TEST(ScoreArithmetic, RankIsTheExactSumRoundedThenScaled) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  std::mt19937_64 rng(test::next_seed());
  std::uniform_int_distribution<std::int32_t> element(-(1 << 22), 1 << 22);
  std::uniform_int_distribution<int> exponent(-149, 127);
  // The sum rounded to float32, times 2^shift in float64 (exact: float64's range holds
  // every such product), rounded to float32 again (which changes nothing but subnormal,
  // vanishing and overflowing results).
  const auto want_rank = [](std::int64_t sum, int shift) {
    return static_cast<float>(std::ldexp(static_cast<double>(static_cast<float>(sum)), shift));
  };
  for (int i = 0; i < 50000; ++i) {
    const int dim = i % 2 ? 128 : 64;
    std::int64_t sum = 0;
    double exact = 0.0;  // integers below 2^53 throughout: exact in float64 too
    for (int d = 0; d < dim; ++d) {
      const std::int32_t a = element(rng), b = element(rng);
      sum += static_cast<std::int64_t>(a) * b;
      exact += static_cast<double>(a) * static_cast<double>(b);
    }
    ASSERT_EQ(static_cast<double>(sum), exact);
    // Every pair of a query's and a key's exponents: shifts over [−340, 212].
    const int shift = detail::score_shift(exponent(rng), exponent(rng));
    ASSERT_EQ(detail::float_bits(detail::score_rank(sum, shift)), detail::float_bits(want_rank(sum, shift)))
        << static_cast<long long>(sum) << " at " << shift;
  }
  // Small sums at the lowest shifts: results in the subnormals, where the second factor
  // rounds (ties to even included: an odd sum times 2^−150), and past them, where the
  // clamped factors must still give 0.
  std::uniform_int_distribution<std::int64_t> small(-(std::int64_t{1} << 26), std::int64_t{1} << 26);
  std::uniform_int_distribution<int> low_shift(-340, -116);
  for (int i = 0; i < 200000; ++i) {
    const std::int64_t sum = i % 4 ? small(rng) : small(rng) % 64;
    const int shift = low_shift(rng);
    ASSERT_EQ(detail::float_bits(detail::score_rank(sum, shift)), detail::float_bits(want_rank(sum, shift)))
        << static_cast<long long>(sum) << " at " << shift;
  }
  // Every shift, at the sums that reach each end first.
  for (int shift = detail::score_shift(-149, -149); shift <= detail::score_shift(127, 127); ++shift)
    for (const std::int64_t sum : {std::int64_t{1}, std::int64_t{-3}, std::int64_t{1} << 51, -(std::int64_t{1} << 50) - 1})
      ASSERT_EQ(detail::float_bits(detail::score_rank(sum, shift)), detail::float_bits(want_rank(sum, shift)))
          << static_cast<long long>(sum) << " at " << shift;
  EXPECT_EQ(detail::float_bits(detail::score_rank(3, -150)), 2u);            // 1.5 ulps: to even, 2
  EXPECT_EQ(detail::float_bits(detail::score_rank(1, -150)), 0u);            // 0.5 ulp: to even, 0
  EXPECT_EQ(detail::float_bits(detail::score_rank(-5, -150)), 0x80000002u);  // -2.5 ulps: -2
  EXPECT_EQ(detail::score_rank(0, 5), 0.0f);
  EXPECT_EQ(detail::score_rank(0, 212), 0.0f);
  EXPECT_EQ(detail::score_rank(std::int64_t{1} << 51, 76), 0x1p127f);  // the largest the first factor reaches
  EXPECT_TRUE(std::isinf(detail::score_rank(std::int64_t{1} << 50, 78)));
}

}  // namespace
}  // namespace vsa
