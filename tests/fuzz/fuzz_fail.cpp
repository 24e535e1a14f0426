// The fuzzers' one way to report a finding (fuzz_targets.hpp).
#include <cstdio>
#include <cstdlib>

#include "fuzz_targets.hpp"

namespace vsa::fuzz {

void fail(const char* what, const char* detail) {
  std::fprintf(stderr, "vsa fuzz: %s (%s)\n", what, detail);
  std::abort();
}

}  // namespace vsa::fuzz
