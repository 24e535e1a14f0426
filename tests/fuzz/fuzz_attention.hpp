// The attention problem both call fuzzers build (fuzz_forward.cpp,
// fuzz_backward.cpp): extents, layouts, strides and dtypes from the fuzzer,
// list contents, counts, ids, garbage past every count and block sizes, and
// the float64 reference problem of a call the contract accepts.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <optional>
#include <vector>
#include <vsa/vsa.hpp>

#include "fuzz_tensor.hpp"
#include "support/reference_attention.hpp"

namespace vsa::fuzz {

// Extents the fuzzer picks: small, so the float64 reference stays quick.
struct Dims {
  std::int64_t batch, heads, kv_heads, num_q_blocks, num_kv_blocks, block, dim, max_kv;
  Layout layout;
};

Dims pick_dims(FuzzedDataProvider& in);

// Sometimes one extent off a little: a shape the contract may refuse.
std::vector<std::int64_t> maybe_bent(FuzzedDataProvider& in, std::vector<std::int64_t> shape);

// A q/k/v/out-shaped tensor of `heads` heads and `seq` rows: outer axes stored
// in any order, rows padded, the sequence maybe stored backwards and (inputs
// only) the heads maybe broadcast from one (stride 0), as torch's expand() makes.
FuzzTensor sequence_tensor(FuzzedDataProvider& in, DType dtype, const Dims& d, std::int64_t heads,
                           std::int64_t seq, bool input);

// Integer metadata: int32/int64 (rarely another dtype), rarely not contiguous.
FuzzTensor int_tensor(FuzzedDataProvider& in, std::vector<std::int64_t> shape);

// A float32 [B, H, Sq] lse, rarely of another dtype or shape.
FuzzTensor lse_tensor(FuzzedDataProvider& in, const Dims& d);

// q's dtype, or rarely another (a call the contract refuses).
DType maybe_other_dtype(FuzzedDataProvider& in, DType dtype);

// The six inputs of a call, and q_variable_block_sizes when the call has one.
struct FuzzInputs {
  FuzzTensor q, k, v, idx, num, vbs;
  std::optional<FuzzTensor> q_vbs;
};

// Their shapes, strides and dtypes (k and v rarely of another dtype than q's).
FuzzInputs input_tensors(FuzzedDataProvider& in, const Dims& d, DType dtype);

// What the lists hold once the fuzzer's bytes run out: empty lists (the
// forward fuzzer, as its committed corpus was found), or whole ones (the
// backward fuzzer, whose longer calls would otherwise rarely list a block).
enum class ListsWhenOut { empty, whole };

// Their values: counts, listed ids (duplicates allowed) and garbage past each
// count; full, empty and partial blocks; lists and block sizes that break the
// value rules at the fuzzer's choice; q, k and v uniform in [-1, 1) from a
// generator seeded by the fuzzer, which is returned for the caller's other
// random tensors.
std::mt19937_64 fill_inputs(FuzzedDataProvider& in, FuzzInputs& t, const Dims& d, ListsWhenOut counts_when_out);

// q_variable_block_sizes half the time: an int tensor of NQ entries (rarely
// another dtype, shape or stride) holding whole, partial and empty query
// blocks, or values outside [0, blk] at the fuzzer's choice.
void add_query_sizes(FuzzedDataProvider& in, FuzzInputs& t, const Dims& d);

// Which of the Sq query rows are padding (offset in their block at or past
// q_variable_block_sizes); none where the call has no valid sizes to say so.
std::vector<bool> padding_rows(const FuzzInputs& t, const Dims& d);

// What the contract lets a padding row of q or dout hold: finite values far
// from any real row's, so a padding row that leaked into a result would show.
constexpr double kPaddingGarbage = 300.0;

// The views of `t` but q_variable_block_sizes, with the layout and a scale
// from the fuzzer.
AttentionInputs attention_inputs(FuzzedDataProvider& in, const FuzzInputs& t, Layout layout);

// The float64 problem of a call the contract accepts, in [B, H, S, D] order.
test::ReferenceProblem reference_problem(const FuzzInputs& t, const AttentionInputs& in, const ProblemShape& s);

}  // namespace vsa::fuzz
