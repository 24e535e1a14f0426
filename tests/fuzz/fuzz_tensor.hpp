// A caller-owned tensor for the fuzzers: a heap buffer sized to exactly the
// elements its view can reach (so AddressSanitizer flags any access outside
// them), and a view with any strides — permuted, padded, negative, zero.
// Every loop over elements lives here, compiled without coverage
// instrumentation (tests/fuzz/CMakeLists.txt) so it costs the fuzzer little.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>
#include <vsa/vsa.hpp>

namespace vsa::fuzz {

class FuzzTensor {
 public:
  FuzzTensor() = default;
  // `shape` and `strides` in elements, one entry per axis (at most kMaxRank).
  FuzzTensor(DType dtype, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides);
  // Row-major contiguous.
  FuzzTensor(DType dtype, std::vector<std::int64_t> shape);

  // The view; null data when `defined` is false (to test missing tensors).
  TensorRef ref(bool defined = true) const;
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t numel() const;

  // Element `flat` of the view, counted row-major over the shape; float
  // dtypes through the test codecs, int32/int64 as integers.
  double get(std::int64_t flat) const;
  void set(std::int64_t flat, double value);
  std::int64_t get_int(std::int64_t flat) const;
  void set_int(std::int64_t flat, std::int64_t value);

  // Uniform values in [-1, 1), rounded to the dtype, in every element.
  void fill_random(std::mt19937_64& rng);
  // Rank 4: the logical [B, H, S, D] values, whichever layout the shape is in,
  // read or written (rounded to the dtype).
  std::vector<double> bhsd_values(Layout layout) const;
  void set_bhsd_values(Layout layout, const std::vector<double>& values);
  // Every element of the sequence rows s with rows[s] (s < rows.size()) set to `value`.
  void set_sequence_rows(Layout layout, const std::vector<bool>& rows, double value);
  std::vector<std::int64_t> int_values() const;

  // Every byte of the buffer, view and gaps alike.
  void fill_bytes(unsigned char byte);
  std::vector<unsigned char> bytes() const;
  // Whether the buffer's bytes outside the view's elements equal `before`'s.
  bool gaps_equal(const std::vector<unsigned char>& before) const;

 private:
  unsigned char* element(std::int64_t flat) const;
  // Calls visit(flat, s) for each element, in [B, H, S, D] order, s its sequence row.
  template <class Visit>
  void for_each_bhsd(Layout layout, Visit&& visit) const;

  DType dtype_ = DType::f32;
  std::vector<std::int64_t> shape_, strides_;
  // The same as plain arrays for element(): std::vector's operator[] is an
  // inline template whose one kept copy may be a coverage-instrumented one.
  int rank_ = 0;
  std::int64_t extent_[kMaxRank] = {}, step_[kMaxRank] = {};
  std::int64_t base_ = 0;  // element offset of the view's first element in the buffer
  std::size_t bytes_ = 0;
  std::unique_ptr<unsigned char[]> buffer_;
};

// Row-major strides of `shape`.
std::vector<std::int64_t> packed_strides(const std::vector<std::int64_t>& shape);

}  // namespace vsa::fuzz
