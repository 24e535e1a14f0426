// Reproducible seeds for the GoogleTest suites.
#pragma once

#include <cstdint>

namespace vsa::test {

// A hash of the running test's name plus a counter.
std::uint64_t next_seed();

}  // namespace vsa::test
