#include "cpu/parallel_for.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vsa/cpu.hpp"
#include "vsa/error.hpp"

namespace vsa::cpu {
namespace {

std::atomic<int> g_requested_threads{0};  // vsa::set_cpu_threads; 0 = not set

// One parallel_for call as the threads see it. Items are handed out one at a
// time from a shared counter, so threads that get cheap items (short lists)
// simply take more of them.
struct Job {
  const std::function<void(std::int64_t)>* body = nullptr;
  std::int64_t count = 0;
  std::atomic<std::int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;

  void work() {
    for (std::int64_t item = next++; item < count && !failed; item = next++) {
      try {
        (*body)(item);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
        failed = true;
      }
    }
  }
};

// Worker threads that live as long as the process and sleep between jobs.
// A job names how many of them take part (helpers); the pool grows when a
// job asks for more than it has, and never shrinks.
class ThreadPool {
 public:
  static ThreadPool& instance() {
    // Never destroyed: workers may still be asleep at exit, and joining them
    // from a static destructor would race with other static destructors.
    // A child made by fork() has only the thread that forked: the parent's
    // workers are not there to take a job or to report its end, and its
    // locks may be held by them. So the child starts with a pool of its own
    // (workers started on first use, as here); the parent's is left alone.
    static const bool created = [] {
      current_ = new ThreadPool;
      ::pthread_atfork(nullptr, nullptr, [] { current_ = new ThreadPool; });
      return true;
    }();
    (void)created;
    return *current_;
  }

  // Runs `job` on the calling thread and `helpers` workers; false (nothing
  // run) when another job holds the pool.
  bool try_run(Job& job, int helpers) {
    // A flag rather than a mutex: a body's nested call comes from a thread
    // that may already be the pool's caller, and must simply be refused.
    if (busy_.exchange(true, std::memory_order_acquire)) return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      try {
        while (static_cast<int>(workers_.size()) < helpers) {
          const int index = static_cast<int>(workers_.size());
          workers_.emplace_back([this, index] { worker_loop(index); });
        }
      } catch (const std::exception&) {
        // A thread the system would not start (a limit on processes or
        // memory): the job runs on the workers there are, and the pool stays
        // usable for later calls.
        helpers = static_cast<int>(workers_.size());
      }
      job_ = &job;
      helpers_ = helpers;
      running_ = helpers;
      ++generation_;
    }
    wake_.notify_all();
    job.work();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return running_ == 0; });
    job_ = nullptr;
    busy_.store(false, std::memory_order_release);
    return true;
  }

 private:
  void worker_loop(int index) {
    std::uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (index >= helpers_) continue;  // not needed for this job
      Job* job = job_;
      lock.unlock();
      job->work();
      lock.lock();
      if (--running_ == 0) done_.notify_one();
    }
  }

  static inline ThreadPool* current_ = nullptr;  // this process's pool (instance())
  std::atomic<bool> busy_{false};  // set while one caller's job runs
  std::mutex mutex_;                // guards everything below
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  Job* job_ = nullptr;
  int helpers_ = 0, running_ = 0;
  std::uint64_t generation_ = 0;
};

}  // namespace

int thread_count() {
  if (const char* env = std::getenv("VSA_NUM_THREADS")) {
    char* end = nullptr;
    const long requested = std::strtol(env, &end, 10);
    // Anything but a whole number in set_cpu_threads' range falls back to the next source:
    // the count is read inside a call, where an error could come after outputs were written.
    if (end != env && *end == '\0' && requested > 0 && requested <= 4096) return static_cast<int>(requested);
  }
  if (const int requested = g_requested_threads.load(std::memory_order_relaxed); requested > 0) return requested;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void parallel_for(std::int64_t count, const std::function<void(std::int64_t)>& body) {
  if (count <= 0) return;
  Job job;
  job.body = &body;
  job.count = count;
  const auto threads = static_cast<int>(std::min<std::int64_t>(thread_count(), count));
  if (threads == 1 || !ThreadPool::instance().try_run(job, threads - 1)) job.work();
  if (job.first_error) std::rethrow_exception(job.first_error);
}

}  // namespace vsa::cpu

namespace vsa {

void set_cpu_threads(int threads) {
  if (threads < 0 || threads > 4096)
    throw Error(ErrorKind::invalid_argument, "threads", "0 (the default) to 4096", std::to_string(threads));
  cpu::g_requested_threads.store(threads, std::memory_order_relaxed);
}

int cpu_threads() { return cpu::thread_count(); }

}  // namespace vsa
