#include "support/host_tensor.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

namespace vsa::test {
namespace {

std::uint16_t read16(const void* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return bits;
}
void write16(void* p, std::uint16_t bits) { std::memcpy(p, &bits, sizeof bits); }

double decode_half(std::uint16_t bits) {
  const double sign = (bits & 0x8000u) ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return mantissa ? std::nan("") : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

std::uint16_t encode_half(double value) {
  if (std::isnan(value)) return 0x7e00u;  // a quiet NaN
  const std::uint16_t sign = std::signbit(value) ? 0x8000u : 0u;
  const double magnitude = std::fabs(value);
  if (std::isinf(magnitude)) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (magnitude < std::ldexp(1.0, -14))  // subnormal range, unit 2^-24
    return static_cast<std::uint16_t>(sign |
                                      static_cast<std::uint16_t>(std::nearbyint(std::ldexp(magnitude, 24))));
  int exponent = 0;
  const double fraction =
      std::frexp(magnitude, &exponent);  // magnitude = fraction * 2^exponent, fraction in [0.5, 1)
  const auto mantissa = static_cast<int>(std::nearbyint((2.0 * fraction - 1.0) * 1024.0));
  const int bits = ((exponent - 1 + 15) << 10) + mantissa;  // a mantissa carry bumps the exponent
  return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::min(bits, 0x7c00)));
}

}  // namespace

double decode_float(DType dtype, const void* element) {
  switch (dtype) {
    case DType::bf16:
      return std::bit_cast<float>(static_cast<std::uint32_t>(read16(element)) << 16);
    case DType::f16:
      return decode_half(read16(element));
    default: {
      float f;
      std::memcpy(&f, element, sizeof f);
      return f;
    }
  }
}

void encode_float(DType dtype, double value, void* element) {
  switch (dtype) {
    case DType::bf16: {  // truncation: the representable neighbour toward zero
      const std::uint32_t bits = std::bit_cast<std::uint32_t>(static_cast<float>(value));
      write16(element, static_cast<std::uint16_t>(bits >> 16));
      break;
    }
    case DType::f16:
      write16(element, encode_half(value));
      break;
    default: {
      const auto f = static_cast<float>(value);
      std::memcpy(element, &f, sizeof f);
    }
  }
}

std::int64_t decode_int(DType dtype, const void* element) {
  if (dtype == DType::i64) {
    std::int64_t v;
    std::memcpy(&v, element, sizeof v);
    return v;
  }
  if (dtype == DType::i32) {
    std::int32_t v;
    std::memcpy(&v, element, sizeof v);
    return v;
  }
  return 0;
}

void encode_int(DType dtype, std::int64_t value, void* element) {
  if (dtype == DType::i64) {
    std::memcpy(element, &value, sizeof value);
  } else if (dtype == DType::i32) {
    const auto v = static_cast<std::int32_t>(value);
    std::memcpy(element, &v, sizeof v);
  }
}

HostTensor::HostTensor(DType dtype, std::vector<std::int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)), stride_(shape_.size()) {
  std::int64_t step = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    stride_[i] = step;
    step *= shape_[i];
  }
  storage_.assign(static_cast<std::size_t>(step) * dtype_size(dtype_), 0);
}

HostTensor HostTensor::with_row_pitch(DType dtype, std::vector<std::int64_t> shape, std::int64_t row_pitch) {
  HostTensor t(dtype, shape);
  t.stride_ = {shape[1] * shape[2] * row_pitch, shape[2] * row_pitch, row_pitch, 1};
  t.storage_.assign(static_cast<std::size_t>(shape[0] * t.stride_[0]) * dtype_size(dtype), 0);
  return t;
}

TensorRef HostTensor::ref() const {
  TensorRef r;
  r.data = const_cast<unsigned char*>(storage_.data());
  r.dtype = dtype_;
  r.rank = static_cast<int>(shape_.size());
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    r.shape[i] = shape_[i];
    r.stride[i] = stride_[i];
  }
  return r;
}

std::int64_t HostTensor::numel() const {
  std::int64_t n = 1;
  for (std::int64_t extent : shape_) n *= extent;
  return n;
}

std::int64_t HostTensor::storage_offset(std::int64_t flat) const {
  std::int64_t offset = 0;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    offset += (flat % shape_[i]) * stride_[i];
    flat /= shape_[i];
  }
  return offset;
}

unsigned char* HostTensor::element(std::int64_t flat) {
  return storage_.data() + storage_offset(flat) * static_cast<std::int64_t>(dtype_size(dtype_));
}
const unsigned char* HostTensor::element(std::int64_t flat) const {
  return storage_.data() + storage_offset(flat) * static_cast<std::int64_t>(dtype_size(dtype_));
}

double HostTensor::get(std::int64_t flat) const { return decode_float(dtype_, element(flat)); }
void HostTensor::set(std::int64_t flat, double value) { encode_float(dtype_, value, element(flat)); }

std::int64_t HostTensor::get_int(std::int64_t flat) const { return decode_int(dtype_, element(flat)); }
void HostTensor::set_int(std::int64_t flat, std::int64_t value) { encode_int(dtype_, value, element(flat)); }

std::int64_t HostTensor::flat_index(std::int64_t i0, std::int64_t i1, std::int64_t i2,
                                    std::int64_t i3) const {
  return ((i0 * shape_[1] + i1) * shape_[2] + i2) * shape_[3] + i3;
}

void HostTensor::fill_random(std::mt19937_64& rng) {
  std::uniform_int_distribution<std::uint32_t> bits;
  for (std::int64_t i = 0; i < numel(); ++i) {
    const std::uint32_t r = bits(rng);
    const auto sign = static_cast<std::uint16_t>((r & 1u) << 15);
    // Random sign, exponent and mantissa bits: magnitudes in [2^-5, 2).
    switch (dtype_) {
      case DType::bf16:  // exponent field 122..127, 7 mantissa bits
        write16(element(i),
                static_cast<std::uint16_t>(sign | ((122u + (r >> 1) % 6u) << 7) | ((r >> 8) & 0x7fu)));
        break;
      case DType::f16:  // exponent field 10..15, 10 mantissa bits
        write16(element(i),
                static_cast<std::uint16_t>(sign | ((10u + (r >> 1) % 6u) << 10) | ((r >> 8) & 0x3ffu)));
        break;
      default:
        set(i, std::uniform_real_distribution<double>(-1.0, 1.0)(rng));
    }
  }
}

unsigned char HostTensor::poison_byte() const {
  return dtype_ == DType::i32 || dtype_ == DType::i64 ? 0x5a : 0xff;
}

void HostTensor::poison() { std::fill(storage_.begin(), storage_.end(), poison_byte()); }

void HostTensor::poison_at(std::int64_t flat) {
  std::fill_n(element(flat), dtype_size(dtype_), poison_byte());
}

bool HostTensor::untouched() const {
  for (unsigned char byte : storage_)
    if (byte != poison_byte()) return false;
  return true;
}

bool HostTensor::written_exactly_view() const {
  const auto size = static_cast<std::int64_t>(dtype_size(dtype_));
  std::vector<bool> in_view(storage_.size() / static_cast<std::size_t>(size), false);
  for (std::int64_t i = 0; i < numel(); ++i) {
    in_view[static_cast<std::size_t>(storage_offset(i))] = true;
    const unsigned char* e = element(i);
    const bool poisoned = std::all_of(e, e + size, [&](unsigned char b) { return b == poison_byte(); });
    if (poisoned) return false;
    if (dtype_ != DType::i32 && dtype_ != DType::i64 && std::isnan(get(i))) return false;
  }
  for (std::size_t slot = 0; slot < in_view.size(); ++slot) {
    if (in_view[slot]) continue;
    for (std::size_t b = 0; b < static_cast<std::size_t>(size); ++b)
      if (storage_[slot * static_cast<std::size_t>(size) + b] != poison_byte()) return false;
  }
  return true;
}

double relative_error(const std::vector<double>& actual, const std::vector<double>& expected) {
  return relative_difference(actual, expected, expected);
}

double relative_difference(const std::vector<double>& a, const std::vector<double>& b,
                           const std::vector<double>& scale) {
  if (a.size() != b.size() || a.size() != scale.size()) return INFINITY;
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += scale[i] * scale[i];
  }
  if (norm > 0.0) return std::sqrt(diff / norm);
  return a.empty() ? 0.0 : std::sqrt(diff / static_cast<double>(a.size()));
}

}  // namespace vsa::test
