// Spreading independent work items over CPU threads.
#pragma once

#include <cstdint>
#include <functional>

namespace vsa::cpu {

// Threads the CPU backend uses: VSA_NUM_THREADS when set to a positive
// integer, otherwise std::thread::hardware_concurrency() (at least 1).
int thread_count();

// Calls body(item) once for every item in [0, count), spread over up to
// thread_count() threads; returns when all are done. Items must not write to
// shared memory another item writes. The first exception thrown by a body is
// rethrown here after every thread has stopped.
void parallel_for(std::int64_t count, const std::function<void(std::int64_t)>& body);

}  // namespace vsa::cpu
