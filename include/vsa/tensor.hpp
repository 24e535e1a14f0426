// Non-owning tensor descriptors: how every buffer crosses the public API.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace vsa {

enum class DType : std::uint8_t { bf16, f16, f32, i32, i64, boolean };
enum class Device : std::uint8_t { cpu, cuda };

constexpr int kMaxRank = 4;

std::size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
const char* device_name(Device device);

// A view of memory owned by the caller: pointer, dtype, shape and strides in
// elements (not bytes). The library never allocates, frees or retains these.
struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::f32;
  int rank = 0;
  std::array<std::int64_t, kMaxRank> shape{};
  std::array<std::int64_t, kMaxRank> stride{};
  Device device = Device::cpu;
  int device_index = 0;

  // Row-major (C-contiguous) view of `data` with the given shape. A shape of
  // more than kMaxRank extents gives a descriptor of that rank holding its
  // first kMaxRank extents, which every call refuses.
  static TensorRef contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                              Device device = Device::cpu, int device_index = 0);

  bool defined() const { return data != nullptr; }
  // The element count; -1 when an extent is negative or the count does not
  // fit in int64 (the argument checks refuse such tensors).
  std::int64_t numel() const;
  bool is_contiguous() const;
  // "[2, 12, 4096, 128]" — used in error messages.
  std::string shape_string() const;
};

}  // namespace vsa
