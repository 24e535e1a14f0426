// libFuzzer entry point over vsa::check_inputs and vsa::forward (CPU
// backend): see fuzz_targets.hpp for the two halves and what they demand.
// Build with the `fuzz` preset; run as tests/fuzz/README.md says.
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  if (in.ConsumeBool())
    vsa::fuzz::fuzz_descriptors(in);
  else
    vsa::fuzz::fuzz_forward(in);
  return 0;
}
