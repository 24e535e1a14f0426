#include "cpu/parallel_for.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace vsa::cpu {

int thread_count() {
  if (const char* env = std::getenv("VSA_NUM_THREADS")) {
    char* end = nullptr;
    const long requested = std::strtol(env, &end, 10);
    // Anything but a whole positive number falls back to the hardware count.
    if (end != env && *end == '\0' && requested > 0 && requested <= 4096) return static_cast<int>(requested);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void parallel_for(std::int64_t count, const std::function<void(std::int64_t)>& body) {
  if (count <= 0) return;
  const auto threads = static_cast<int>(std::min<std::int64_t>(thread_count(), count));
  if (threads == 1) {
    for (std::int64_t item = 0; item < count; ++item) body(item);
    return;
  }

  // Items are handed out one at a time from a shared counter, so threads
  // that get cheap items (short lists) simply take more of them.
  std::atomic<std::int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (std::int64_t item = next++; item < count && !failed; item = next++) {
      try {
        body(item);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();  // the calling thread works too
  for (std::thread& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace vsa::cpu
