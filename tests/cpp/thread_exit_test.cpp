// CPU calls made while a thread ends: from a thread_local object's destructor,
// and on the main thread from an atexit handler or a static object's
// destructor (which C++ runs after the main thread's thread_local objects are
// destroyed). An engine may well free a model that way. Each such call gives
// what the same call gave before.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <thread>

#include "support/attention_problem.hpp"
#include "vsa/cpu.hpp"

namespace vsa::test {
namespace {

// One problem's forward and backward, and what they gave on their first call.
struct Calls {
  explicit Calls(std::uint64_t seed) : problem(problem_case(), seed) {
    // Every list names every (full) block: scratch buffers of 192 KiB and
    // more, which the allocator maps on their own, so that a use after they
    // are freed faults without a sanitizer too.
    const AttentionCase& c = problem.spec();
    for (std::int64_t j = 0; j < c.num_kv_blocks; ++j) problem.set_vbs(j, c.block);
    for (std::int64_t h = 0; h < c.heads; ++h)
      for (std::int64_t i = 0; i < c.num_q_blocks; ++i) problem.set_list(0, h, i, {5, 0, 4, 1, 3, 2});
    backward = problem.backward_params();
    forward = problem.forward_params();
    vsa::forward(forward);
    out = problem.out;
    vsa::backward(backward);
    dq = problem.dq;
    dk = problem.dk;
    dv = problem.dv;
  }

  static AttentionCase problem_case() {
    AttentionCase c;
    c.heads = 4;
    c.kv_heads = 2;
    c.num_q_blocks = 4;
    c.num_kv_blocks = 6;
    c.max_kv = 6;
    c.head_dim = 128;
    return c;
  }

  // Both calls again, into poisoned outputs: whether they gave the same bytes.
  bool repeat() {
    problem.out.poison();
    vsa::forward(forward);
    problem.dq.poison();
    problem.dk.poison();
    problem.dv.poison();
    vsa::backward(backward);
    return problem.out.same_bytes(out) && problem.dq.same_bytes(dq) && problem.dk.same_bytes(dk) &&
           problem.dv.same_bytes(dv);
  }

  AttentionProblem problem;
  ForwardParams forward;
  BackwardParams backward;
  HostTensor out, dq, dk, dv;
};

Calls* g_calls = nullptr;

// The process's main thread: calls on it (one CPU thread, so that every
// item runs there), then exit(); its atexit handler repeats them.
[[noreturn]] void call_again_at_exit(std::uint64_t seed) {
  vsa::set_cpu_threads(1);
  g_calls = new Calls(seed);
  std::atexit([] { std::_Exit(g_calls->repeat() ? 0 : 1); });
  std::exit(2);
}

TEST(ThreadExit, CallsFromAnAtexitHandlerOnTheMainThread) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(call_again_at_exit(next_seed()), ::testing::ExitedWithCode(0), "");
}

// Repeats the calls when its thread ends.
struct RepeatAtThreadEnd {
  ~RepeatAtThreadEnd() {
    if (calls != nullptr) *same = calls->repeat();
  }
  Calls* calls = nullptr;
  bool* same = nullptr;
};

// A thread whose thread_local object (made before the thread's first call)
// makes the calls again from its destructor, which runs after those of the
// thread_local objects made later.
[[noreturn]] void call_again_from_a_thread_local_destructor(std::uint64_t seed) {
  vsa::set_cpu_threads(1);
  bool same = false;
  std::unique_ptr<Calls> calls;
  std::thread([&] {
    thread_local RepeatAtThreadEnd repeat_at_end;
    calls = std::make_unique<Calls>(seed);
    repeat_at_end.calls = calls.get();
    repeat_at_end.same = &same;
  }).join();
  std::_Exit(same ? 0 : 1);
}

TEST(ThreadExit, CallsFromAThreadLocalDestructor) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(call_again_from_a_thread_local_destructor(next_seed()), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace vsa::test
