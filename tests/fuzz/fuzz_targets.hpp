// The fuzz targets' bodies: the forward fuzzer's two halves
// (forward_fuzz.cpp picks one per input) and the backward fuzzer's
// (backward_fuzz.cpp).
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
// counts, block sizes and q_variable_block_sizes from the fuzzer, q/k/v
// random (finite garbage in padding query rows). vsa::forward must
// either raise vsa::Error and leave its outputs as they were, or — exactly
// when the oracle says the call is valid — write a finite result that
// matches the float64 reference.
void fuzz_forward(FuzzedDataProvider& in);

// Whole backward calls on real buffers, built as fuzz_forward's, with out,
// dout, lse and the three gradients from the fuzzer too (out and lse the
// float64 forward's when the call is valid, NaN in padding query rows).
// vsa::backward must either raise vsa::Error and leave dq, dk and dv as they
// were, or — exactly when the oracle says the call is valid — write finite
// gradients that match the float64 reference, exactly zero where the
// contract says so (dq of a row with nothing to attend or a padding row, dk
// and dv of keys past their block's size), and nothing outside their views;
// it never writes to what it reads.
void fuzz_backward(FuzzedDataProvider& in);

// Stops the fuzzer with a report: libFuzzer saves the input that got here.
[[noreturn]] void fail(const char* what, const char* detail);

}  // namespace vsa::fuzz
