// Spreading independent work items over the CPU backend's threads: one
// persistent pool, started on first use and reused by every later call.
#pragma once

#include <cstdint>
#include <functional>

namespace vsa::cpu {

// Threads the CPU backend uses: VSA_NUM_THREADS when set to a positive
// integer, else the count given to vsa::set_cpu_threads (Python passes
// torch.get_num_threads()), else std::thread::hardware_concurrency()
// (at least 1).
int thread_count();

// Calls body(item) once for every item in [0, count), spread over up to
// thread_count() threads (the caller's and the pool's); returns when all are
// done. Items must not write to shared memory another item writes. The first
// exception thrown by a body is rethrown here after every thread has stopped.
// A call made while the pool is busy (from inside a body, or from a second
// caller thread) runs its items on the calling thread alone.
void parallel_for(std::int64_t count, const std::function<void(std::int64_t)>& body);

}  // namespace vsa::cpu
