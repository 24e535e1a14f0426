// The CPU backend's thread helper (an internal header).
#include "cpu/parallel_for.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace vsa::test {
namespace {

// Sets VSA_NUM_THREADS for one scope and restores it afterwards.
class ThreadsEnv {
 public:
  explicit ThreadsEnv(const char* value) {
    if (const char* old = std::getenv("VSA_NUM_THREADS")) saved_ = old, had_ = true;
    if (value)
      ::setenv("VSA_NUM_THREADS", value, 1);
    else
      ::unsetenv("VSA_NUM_THREADS");
  }
  ~ThreadsEnv() {
    if (had_)
      ::setenv("VSA_NUM_THREADS", saved_.c_str(), 1);
    else
      ::unsetenv("VSA_NUM_THREADS");
  }

 private:
  std::string saved_;
  bool had_ = false;
};

TEST(ParallelFor, ThreadCountHonoursTheEnvironment) {
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  {
    ThreadsEnv env("3");
    EXPECT_EQ(cpu::thread_count(), 3);
  }
  {
    ThreadsEnv env(nullptr);
    EXPECT_EQ(cpu::thread_count(), hardware);
  }
  for (const char* bad : {"0", "-2", "four", "4x", ""}) {
    ThreadsEnv env(bad);
    EXPECT_EQ(cpu::thread_count(), hardware) << "'" << bad << "'";
  }
}

TEST(ParallelFor, VisitsEveryItemOnce) {
  for (const char* threads : {"1", "4"}) {
    ThreadsEnv env(threads);
    std::vector<std::atomic<int>> visits(1000);
    cpu::parallel_for(1000, [&](std::int64_t item) { ++visits[static_cast<std::size_t>(item)]; });
    for (const auto& v : visits) ASSERT_EQ(v.load(), 1);
    cpu::parallel_for(0, [](std::int64_t) { FAIL() << "no items"; });
  }
}

TEST(ParallelFor, RethrowsTheFirstError) {
  ThreadsEnv env("4");
  EXPECT_THROW(cpu::parallel_for(100,
                                 [](std::int64_t item) {
                                   if (item == 37) throw std::runtime_error("item 37");
                                 }),
               std::runtime_error);
}

}  // namespace
}  // namespace vsa::test
