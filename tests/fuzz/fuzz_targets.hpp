// The two halves of the forward fuzzer (forward_fuzz.cpp picks one per input).
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

namespace vsa::fuzz {

// Descriptors only: plausible TensorRefs with arbitrary fields overwritten
// (rank, shape, strides, dtype, device, null data, layout, scale), over
// memory that AddressSanitizer forbids reading. check_inputs and supported
// must agree with the contract oracle without touching tensor contents, and
// a forward call the oracle refuses must fail before reading anything.
void fuzz_descriptors(FuzzedDataProvider& in);

// Whole calls on real buffers: shapes, strides, dtypes, list contents,
// counts and block sizes from the fuzzer, q/k/v random. vsa::forward must
// either raise vsa::Error and leave its outputs as they were, or — exactly
// when the oracle says the call is valid — write a finite result that
// matches the float64 reference.
void fuzz_forward(FuzzedDataProvider& in);

// Stops the fuzzer with a report: libFuzzer saves the input that got here.
[[noreturn]] void fail(const char* what, const char* detail);

}  // namespace vsa::fuzz
