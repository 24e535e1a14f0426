// libFuzzer entry point over vsa::backward (CPU backend): see
// fuzz_targets.hpp for what it demands. Build with the `fuzz` preset; run as
// tests/fuzz/README.md says.
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  vsa::fuzz::fuzz_backward(in);
  return 0;
}
