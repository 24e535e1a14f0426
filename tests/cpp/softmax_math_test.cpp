// The CPU softmax's elementwise math (an internal header): the exponential
// against double exp2 over the float range, its edges, and the row maximum.
#include "cpu/softmax_math.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "support/test_seed.hpp"

namespace vsa::test {
namespace {

// exp2_shifted with shift 0 on a copy of `t`: 2^t elementwise.
std::vector<float> exp2_of(std::vector<float> t) {
  cpu::exp2_shifted(t.data(), static_cast<std::int64_t>(t.size()), 0.0f);
  return t;
}

// Every 509th float in [-126, 127] (2^-126 and up is where results are
// normal floats), both signs, about four million values.
std::vector<float> sampled_exponents() {
  std::vector<float> t;
  const auto top_positive = std::bit_cast<std::uint32_t>(127.0f);
  const auto bottom_negative = std::bit_cast<std::uint32_t>(-126.0f);
  for (std::uint32_t bits = 0; bits < top_positive; bits += 509) t.push_back(std::bit_cast<float>(bits));
  for (std::uint32_t bits = 0x80000000u; bits <= bottom_negative; bits += 509) t.push_back(std::bit_cast<float>(bits));
  t.push_back(-126.0f);
  t.push_back(127.0f);
  return t;
}

// 1 ulp when the polynomial runs on fused multiply-adds; the clones without
// FMA (and builds without clones: clang, the sanitizer presets) round each
// Horner step twice and reach 1.2 ulp, so the bound every build meets is 1.25.
TEST(SoftmaxMath, Exp2WithinAnUlpAndAQuarterOverTheFloatRange) {
  const std::vector<float> t = sampled_exponents();
  const std::vector<float> got = exp2_of(t);
  double worst = 0.0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const double exact = std::exp2(static_cast<double>(t[i]));
    // The spacing of floats at the exact value: one ulp.
    const auto as_float = static_cast<float>(exact);
    const double ulp = std::nextafter(as_float, std::numeric_limits<float>::infinity()) - as_float;
    const double err = std::abs(got[i] - exact) / ulp;
    worst = std::max(worst, err);
    ASSERT_LE(err, 1.25) << "t " << t[i] << " got " << got[i] << " exact " << exact;
  }
  RecordProperty("worst_ulp", std::to_string(worst));
}

TEST(SoftmaxMath, Exp2Edges) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> got;  // one row each: +inf and -inf in one row make it NaN (the next test)
  for (float t : {0.0f, -0.0f, 1.0f, -1.0f, 127.0f, -126.0f, -126.75f, -127.0f, -1000.0f, -inf, 127.5f, 1000.0f, inf})
    got.push_back(exp2_of({t})[0]);
  EXPECT_EQ(got[0], 1.0f);  // a row's maximum weighs exactly 1
  EXPECT_EQ(got[1], 1.0f);
  EXPECT_EQ(got[2], 2.0f);
  EXPECT_EQ(got[3], 0.5f);
  EXPECT_EQ(got[4], std::ldexp(1.0f, 127));
  EXPECT_EQ(got[5], std::ldexp(1.0f, -126));
  for (int i = 6; i <= 9; ++i) EXPECT_EQ(got[i], 0.0f) << i;  // below the normal floats: flushed
  for (int i = 10; i <= 12; ++i) EXPECT_EQ(got[i], inf) << i;
}

TEST(SoftmaxMath, Exp2ShiftedMakesARowWithNaNAllNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (std::int64_t n : {1, 3, 8, 17, 504}) {
    for (std::int64_t at : {std::int64_t{0}, n / 2, n - 1}) {
      std::vector<float> x(n, -1.0f);
      x[at] = nan;
      EXPECT_TRUE(std::isnan(cpu::exp2_shifted(x.data(), n, 0.0f))) << n << " " << at;
      for (float v : x) ASSERT_TRUE(std::isnan(v)) << n << " " << at;
    }
    std::vector<float> x(n, -1.0f);  // a NaN shift
    EXPECT_TRUE(std::isnan(cpu::exp2_shifted(x.data(), n, nan))) << n;
    for (float v : x) ASSERT_TRUE(std::isnan(v)) << n;
  }
  std::vector<float> both = {inf, -1.0f, -inf};  // inf - inf in the row's sum
  EXPECT_TRUE(std::isnan(cpu::exp2_shifted(both.data(), 3, 0.0f)));
}

TEST(SoftmaxMath, Exp2ShiftedSubtractsTheShiftAndSums) {
  std::mt19937 rng(static_cast<std::uint32_t>(next_seed()));
  std::uniform_real_distribution<float> score(-30.0f, 0.0f);
  for (std::int64_t n : {1, 7, 8, 9, 63, 504, 1000}) {
    std::vector<float> x(n);
    for (float& v : x) v = score(rng) + 5.0f;
    std::vector<float> y = x;
    const float sum = cpu::exp2_shifted(y.data(), n, 5.0f);
    double exact_sum = 0.0, got_sum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double exact = std::exp2(static_cast<double>(x[i]) - 5.0);
      ASSERT_NEAR(y[i], exact, 4e-7 * exact) << "n " << n << " i " << i;
      exact_sum += exact;
      got_sum += y[i];
    }
    EXPECT_NEAR(sum, got_sum, 1e-6 * got_sum) << n;
    EXPECT_NEAR(sum, exact_sum, 1e-6 * exact_sum) << n;
  }
}

TEST(SoftmaxMath, RowMaxFindsTheLargestAnywhere) {
  std::mt19937 rng(static_cast<std::uint32_t>(next_seed()));
  std::normal_distribution<float> value;
  for (std::int64_t n : {1, 2, 8, 9, 17, 504}) {
    for (std::int64_t at : {std::int64_t{0}, n / 2, n - 1}) {
      std::vector<float> x(n);
      for (float& v : x) v = value(rng);
      x[at] = 100.0f;
      EXPECT_EQ(cpu::row_max(x.data(), n), 100.0f) << n << " " << at;
    }
  }
}

}  // namespace
}  // namespace vsa::test
