#include "fuzz_tensor.hpp"

#include <algorithm>
#include <cstring>

#include "support/host_tensor.hpp"

namespace vsa::fuzz {

std::vector<std::int64_t> packed_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= shape[i];
  }
  return strides;
}

FuzzTensor::FuzzTensor(DType dtype, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides)
    : dtype_(dtype), shape_(std::move(shape)), strides_(std::move(strides)), rank_(static_cast<int>(shape_.size())) {
  std::copy(shape_.begin(), shape_.end(), extent_);
  std::copy(strides_.begin(), strides_.end(), step_);
  // The lowest and highest element offsets the view reaches from its first element.
  std::int64_t low = 0, high = 0;
  bool empty = false;
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    empty = empty || shape_[i] <= 0;
    const std::int64_t reach = shape_[i] > 0 ? (shape_[i] - 1) * strides_[i] : 0;
    (reach < 0 ? low : high) += reach;
  }
  base_ = -low;
  const std::size_t elements = empty ? 0 : static_cast<std::size_t>(high - low + 1);
  bytes_ = elements * dtype_size(dtype_);
  // new[0] still gives a unique pointer, which ASan flags on any access.
  buffer_.reset(new unsigned char[bytes_]);
  std::memset(buffer_.get(), 0, bytes_);
}

FuzzTensor::FuzzTensor(DType dtype, std::vector<std::int64_t> shape)
    : FuzzTensor(dtype, shape, packed_strides(shape)) {}

TensorRef FuzzTensor::ref(bool defined) const {
  TensorRef r;
  r.data = defined ? buffer_.get() + base_ * static_cast<std::int64_t>(dtype_size(dtype_)) : nullptr;
  r.dtype = dtype_;
  r.rank = static_cast<int>(shape_.size());
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    r.shape[i] = shape_[i];
    r.stride[i] = strides_[i];
  }
  return r;
}

std::int64_t FuzzTensor::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= extent_[i];
  return n;
}

unsigned char* FuzzTensor::element(std::int64_t flat) const {
  std::int64_t offset = base_;
  for (int i = rank_ - 1; i >= 0; --i) {
    offset += (flat % extent_[i]) * step_[i];
    flat /= extent_[i];
  }
  return buffer_.get() + offset * static_cast<std::int64_t>(dtype_size(dtype_));
}

double FuzzTensor::get(std::int64_t flat) const { return test::decode_float(dtype_, element(flat)); }
void FuzzTensor::set(std::int64_t flat, double value) { test::encode_float(dtype_, value, element(flat)); }

std::int64_t FuzzTensor::get_int(std::int64_t flat) const { return test::decode_int(dtype_, element(flat)); }
void FuzzTensor::set_int(std::int64_t flat, std::int64_t value) { test::encode_int(dtype_, value, element(flat)); }

void FuzzTensor::fill_bytes(unsigned char byte) { std::memset(buffer_.get(), byte, bytes_); }

std::vector<unsigned char> FuzzTensor::bytes() const {
  return std::vector<unsigned char>(buffer_.get(), buffer_.get() + bytes_);
}

void FuzzTensor::fill_random(std::mt19937_64& rng) {
  // 53 random bits scaled by hand: std::uniform_real_distribution takes a
  // logarithm per draw in libstdc++, which dominated a fuzz run.
  for (std::int64_t i = 0; i < numel(); ++i) set(i, static_cast<double>(rng() >> 11) * 0x1.0p-52 - 1.0);
}

template <class Visit>
void FuzzTensor::for_each_bhsd(Layout layout, Visit&& visit) const {
  const bool bshd = layout == Layout::bshd;
  const std::int64_t heads = bshd ? extent_[2] : extent_[1], seq = bshd ? extent_[1] : extent_[2];
  const std::int64_t dim = extent_[3];
  for (std::int64_t b = 0; b < extent_[0]; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t s = 0; s < seq; ++s)
        for (std::int64_t x = 0; x < dim; ++x)
          visit(bshd ? ((b * seq + s) * heads + h) * dim + x : ((b * heads + h) * seq + s) * dim + x, s);
}

std::vector<double> FuzzTensor::bhsd_values(Layout layout) const {
  std::vector<double> values(static_cast<std::size_t>(numel()));
  double* next = values.data();
  for_each_bhsd(layout, [&](std::int64_t flat, std::int64_t) { *next++ = get(flat); });
  return values;
}

void FuzzTensor::set_bhsd_values(Layout layout, const std::vector<double>& values) {
  const double* next = values.data();
  for_each_bhsd(layout, [&](std::int64_t flat, std::int64_t) { set(flat, *next++); });
}

void FuzzTensor::set_sequence_rows(Layout layout, const std::vector<bool>& rows, double value) {
  for_each_bhsd(layout, [&](std::int64_t flat, std::int64_t s) {
    if (static_cast<std::size_t>(s) < rows.size() && rows[static_cast<std::size_t>(s)]) set(flat, value);
  });
}

std::vector<std::int64_t> FuzzTensor::int_values() const {
  std::vector<std::int64_t> values(static_cast<std::size_t>(numel()));
  std::int64_t* next = values.data();
  for (std::int64_t i = 0; i < numel(); ++i) *next++ = get_int(i);
  return values;
}

bool FuzzTensor::gaps_equal(const std::vector<unsigned char>& before) const {
  std::unique_ptr<bool[]> in_view(new bool[bytes_]());
  const auto size = static_cast<std::size_t>(dtype_size(dtype_));
  for (std::int64_t i = 0; i < numel(); ++i) {
    const auto first = static_cast<std::size_t>(element(i) - buffer_.get());
    for (std::size_t b = 0; b < size; ++b) in_view[first + b] = true;
  }
  const unsigned char* old = before.data();
  for (std::size_t b = 0; b < bytes_; ++b)
    if (!in_view[b] && buffer_[b] != old[b]) return false;
  return true;
}

}  // namespace vsa::fuzz
