#include "support/test_seed.hpp"

#include <gtest/gtest.h>

#include <string>

namespace vsa::test {

std::uint64_t next_seed() {
  // The counter restarts with every test, so a test draws the same seeds
  // whether it runs alone or in the whole suite.
  static std::string last_test;
  static std::uint64_t counter = 0;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "";
  if (name != last_test) {
    last_test = name;
    counter = 0;
  }
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash + ++counter;
}

}  // namespace vsa::test
