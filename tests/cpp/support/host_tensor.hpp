// Owning host buffers for the tests, with their own element encoding and
// decoding (independent of the library's conversions) and NaN poisoning.
// Free of GoogleTest, so the fuzzers share it.
#pragma once

#include <cstdint>
#include <random>
#include <vector>
#include <vsa/vsa.hpp>

namespace vsa::test {

// Test-side decoding/encoding of one element; bf16/f16 via plain arithmetic.
double decode_float(DType dtype, const void* element);
// Nearest representable value (any rounding of ties is fine for inputs).
void encode_float(DType dtype, double value, void* element);
// int32/int64 elements; other dtypes decode as 0 and encode nothing.
std::int64_t decode_int(DType dtype, const void* element);
void encode_int(DType dtype, std::int64_t value, void* element);

class HostTensor {
 public:
  HostTensor() = default;
  // Row-major contiguous.
  HostTensor(DType dtype, std::vector<std::int64_t> shape);
  // Rank-4 view whose axis-2 stride is `row_pitch` >= shape[3] elements
  // (the other strides packed above it), so the rows have gaps between them:
  // a non-contiguous view such as one slice of a packed qkv tensor.
  static HostTensor with_row_pitch(DType dtype, std::vector<std::int64_t> shape, std::int64_t row_pitch);

  TensorRef ref() const;
  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t numel() const;

  // Element `flat` of the view, counted row-major over its logical shape.
  double get(std::int64_t flat) const;
  void set(std::int64_t flat, double value);
  std::int64_t get_int(std::int64_t flat) const;
  void set_int(std::int64_t flat, std::int64_t value);
  // Rank-4 logical access.
  std::int64_t flat_index(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) const;

  // Random values exactly representable in the dtype, of both signs and
  // varied magnitude (never zeros): floats in roughly [-2, 2].
  void fill_random(std::mt19937_64& rng);

  // Fills the whole storage, gaps included, with a pattern no call writes:
  // all-ones bytes (NaN) for floats, 0x5a bytes for integers.
  void poison();
  // The poison in one element of the view.
  void poison_at(std::int64_t flat);
  // Whether the whole storage still holds the poison.
  bool untouched() const;
  // Whether the two storages hold the same bytes (a bitwise repeat).
  bool same_bytes(const HostTensor& other) const { return storage_ == other.storage_; }
  // Whether every element of the view was overwritten (not NaN / not poison)
  // while every storage element outside the view still holds the poison.
  bool written_exactly_view() const;

 private:
  std::int64_t storage_offset(std::int64_t flat) const;
  unsigned char* element(std::int64_t flat);
  const unsigned char* element(std::int64_t flat) const;
  unsigned char poison_byte() const;

  DType dtype_ = DType::f32;
  std::vector<std::int64_t> shape_, stride_;
  std::vector<unsigned char> storage_;
};

// Relative Frobenius error ||actual - expected|| / ||expected||. When
// expected is all zero (e.g. dq and dk when every row attends one key, so
// the softmax has no gradient), the root-mean-square error per element
// instead: the test inputs are of order 1, so that is relative to their
// scale, and it does not grow with the element count as the norm would.
double relative_error(const std::vector<double>& actual, const std::vector<double>& expected);
// ||a - b|| / ||scale||, with the same root-mean-square fallback when scale
// is all zero: two approximations compared relative to the exact value.
double relative_difference(const std::vector<double>& a, const std::vector<double>& b,
                           const std::vector<double>& scale);

}  // namespace vsa::test
