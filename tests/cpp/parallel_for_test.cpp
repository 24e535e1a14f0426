// The CPU backend's thread helper (an internal header).
#include "cpu/parallel_for.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "vsa/cpu.hpp"
#include "vsa/error.hpp"

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
  {
    ThreadsEnv env("4096");  // the top of set_cpu_threads' range
    EXPECT_EQ(cpu::thread_count(), 4096);
  }
  for (const char* bad : {"0", "-2", "four", "4x", "", "4097", "99999999999999999999"}) {
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

TEST(ParallelFor, SetCpuThreadsAppliesWhenTheEnvironmentIsSilent) {
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ThreadsEnv env(nullptr);
  vsa::set_cpu_threads(3);
  EXPECT_EQ(vsa::cpu_threads(), 3);
  {
    ThreadsEnv explicit_env("2");  // the environment variable wins
    EXPECT_EQ(vsa::cpu_threads(), 2);
  }
  vsa::set_cpu_threads(0);  // back to the default
  EXPECT_EQ(vsa::cpu_threads(), hardware);
}

TEST(ParallelFor, SetCpuThreadsRejectsBadCounts) {
  ThreadsEnv env(nullptr);
  vsa::set_cpu_threads(3);
  for (const int bad : {-1, 4097}) {
    try {
      vsa::set_cpu_threads(bad);
      ADD_FAILURE() << "no error for " << bad;
    } catch (const vsa::Error& e) {
      EXPECT_EQ(e.argument(), "threads");
      EXPECT_EQ(e.got(), std::to_string(bad));
    }
  }
  EXPECT_EQ(vsa::cpu_threads(), 3);  // a refused count changes nothing
  vsa::set_cpu_threads(0);
}

// Threads are started once and reused: a thread-local flag counts every
// thread that ever ran an item, and many calls add no new ones.
std::atomic<int> g_threads_seen{0};
void note_thread() {
  thread_local bool seen = false;
  if (!seen) {
    seen = true;
    ++g_threads_seen;
  }
}

// The threads that took items over 20 calls of 64 slow items, made from a fresh caller thread
// (so the count is of the pool's threads and that caller alone).
int threads_over_twenty_calls() {
  std::thread([] {
    g_threads_seen = 0;
    for (int call = 0; call < 20; ++call)
      cpu::parallel_for(64, [](std::int64_t) {
        note_thread();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      });
  }).join();
  return g_threads_seen.load();
}

TEST(ParallelFor, ReusesItsThreadsAcrossCalls) {
  ThreadsEnv env("3");
  const int threads = threads_over_twenty_calls();
  EXPECT_GE(threads, 2) << "the pool's workers took no items";
  EXPECT_LE(threads, 3) << "threads were started per call";
}

// Sets the stack size of the threads started from now on (pthread's
// default attributes, which std::thread uses).
void set_default_thread_stack(std::size_t bytes) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_setattr_default_np(&attr);
  pthread_attr_destroy(&attr);
}

// A thread the system will not start (here: asked for a stack larger than
// the address space) leaves the call to the threads there are, and the pool
// to the next call: every item is visited, nothing escapes, and a later call
// with two threads gets two. Run in a fresh process (a threadsafe death
// test), so that the pool starts empty and the setting stays there.
TEST(ParallelFor, ThreadsThatCannotStartLeaveTheCallAndThePoolWorking) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ThreadsEnv env(nullptr);
        vsa::set_cpu_threads(8);
        set_default_thread_stack(std::size_t{1} << 50);
        std::vector<std::atomic<int>> visits(1000);
        cpu::parallel_for(1000, [&](std::int64_t item) { ++visits[static_cast<std::size_t>(item)]; });
        for (const auto& v : visits)
          if (v.load() != 1) std::_Exit(2);
        set_default_thread_stack(std::size_t{8} << 20);
        vsa::set_cpu_threads(2);
        g_threads_seen = 0;  // this (fresh) process's main thread has run no item yet
        for (int call = 0; call < 20; ++call)
          cpu::parallel_for(64, [](std::int64_t) {
            note_thread();
            std::this_thread::sleep_for(std::chrono::microseconds(100));
          });
        std::_Exit(g_threads_seen.load() == 2 ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "");
}

// A child made by fork() has only the thread that forked: the parent's
// workers are not there. Its first call ran the items on the calling thread,
// then waited for workers that would never report (a DataLoader worker or a
// multiprocessing child hung in its first vsa call). The pool runs here with
// two threads before the fork; the child must visit every item and return,
// with a pool of its own (two threads again), well before its alarm.
TEST(ParallelFor, AForkedChildGetsAPoolOfItsOwn) {
  ThreadsEnv env("2");
  g_threads_seen = 0;
  cpu::parallel_for(64, [](std::int64_t) {
    note_thread();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  });
  ASSERT_GE(g_threads_seen.load(), 1);
  const pid_t child = ::fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    ::alarm(10);  // a hang ends as SIGALRM, which the parent reports
    std::vector<std::atomic<int>> visits(1000);
    cpu::parallel_for(1000, [&](std::int64_t item) { ++visits[static_cast<std::size_t>(item)]; });
    for (const auto& v : visits)
      if (v.load() != 1) std::_Exit(2);
    std::_Exit(threads_over_twenty_calls() == 2 ? 0 : 3);  // the child's pool alone
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child hung or crashed: signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "2: an item visited other than once; 3: the child's pool did not run two threads";
}

}  // namespace
}  // namespace vsa::test
