// Argument checking, in one place for every backend. Each check throws
// vsa::Error naming the argument, what was expected and what was given.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

#include "vsa/attention.hpp"
#include "vsa/error.hpp"

namespace vsa::detail {

[[noreturn]] void fail(const std::string& argument, const std::string& expected,
                       const std::string& got);
[[noreturn]] void fail_unsupported(const std::string& argument, const std::string& expected,
                                   const std::string& got);

void expect_defined(const TensorRef& t, const char* name);
void expect_rank(const TensorRef& t, const char* name, int rank);
void expect_int_dtype(const TensorRef& t, const char* name);
// Extents >= 0 whose bytes fit in int64: a descriptor of more memory than a
// process can hold is refused before any count or offset is computed from it.
void expect_addressable(const TensorRef& t, const char* name);
void expect_contiguous(const TensorRef& t, const char* name);
void expect_same_device(const TensorRef& t, const char* name, const TensorRef& ref,
                        const char* ref_name = "q");
// shape must equal `expected` (rank included)
void expect_shape(const TensorRef& t, const char* name, const TensorRef& like);
void expect_shape(const TensorRef& t, const char* name, std::initializer_list<std::int64_t> dims);
// q/k/v-shaped: rank 4, a float dtype (bf16, f16, f32), unit stride on D.
void expect_sequence_tensor(const TensorRef& t, const char* name);
void expect_dtype(const TensorRef& t, const char* name, DType dtype);
// A sequence tensor with the shape, dtype and device of `like`.
void expect_like(const TensorRef& t, const char* name, const TensorRef& like, const char* like_name);
// A sequence tensor the call writes: no two of its rows (or elements) certainly at one place.
void expect_distinct_rows(const TensorRef& t, const char* name);
// expect_like and expect_distinct_rows.
void expect_output_like(const TensorRef& t, const char* name, const TensorRef& like, const char* like_name);

// The softmax scale: finite, >= 0 (0 selects 1/sqrt(D)), and finite in base 2.
void expect_scale(float scale);

// A tensor of a call and the name of its argument.
struct NamedTensor {
  TensorRef tensor;
  const char* name;
};
// Each tensor of `written` shares no memory with any other tensor of the call
// (`written` and `read`): its writes would reach what the call still reads,
// or another output. Undefined and empty tensors share nothing; tensors on
// different devices are never compared. Tensors whose elements only
// interleave (q, k and v as slices of one packed qkv buffer) are told apart
// exactly where their innermost dense runs fit between the rows' common
// stride; other overlapping address ranges are refused.
void expect_unshared(std::initializer_list<NamedTensor> written, const std::vector<NamedTensor>& read);
// q, k, v and the metadata of `in`, named as its fields: what every attention call reads.
std::vector<NamedTensor> attention_inputs(const AttentionInputs& in);
// A caller's device scratch as a tensor of bytes on `like`'s device; undefined
// on the CPU, whose backend ignores it and keeps scratch of its own.
TensorRef workspace_tensor(void* data, std::size_t bytes, const TensorRef& like);
// `input`, or an undefined tensor when it is `output` itself (pointer,
// device, dtype, shape and strides): for the calls documented to write that
// output over that input in place, element by element.
TensorRef unless_same_view(const TensorRef& input, const TensorRef& output);

// The count of ids an int32 list can hold: [0, 2^31).
constexpr std::int64_t kInt32Ids = std::int64_t{1} << 31;
// An int32 output whose values may reach `largest` (ids or counts) would wrap past 2^31 - 1.
void expect_int32_holds(const TensorRef& out, const char* name, std::int64_t largest, const std::string& why);

// Outputs of the forward pass (out, and lse when need_lse) and its optional
// epilogue addend (coarse, gate).
void check_forward_outputs(const ForwardParams& p, const ProblemShape& s);
// Everything a backward pass reads or writes besides the inputs.
void check_backward_tensors(const BackwardParams& p, const ProblemShape& s);

// Reads the host-resident metadata: counts in [0, max_kv], the first count
// indices of each row in [0, NK), vbs (and q_variable_block_sizes when given)
// in [0, blk].
void check_metadata_values(const AttentionInputs& in, const ProblemShape& s);
// The list part of that check, for contiguous host lists idx [..., max_kv]
// and num [...] with idx.numel() == num.numel() * max_kv.
void check_block_list_values(const TensorRef& idx, const char* idx_name, const TensorRef& num,
                             const char* num_name, std::int64_t num_kv_blocks);

// The scale actually used (the default 1/sqrt(D) when in.scale == 0).
float resolved_scale(const AttentionInputs& in, const ProblemShape& s);

}  // namespace vsa::detail
