#include "vsa/tensor.hpp"

#include <string>

namespace vsa {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::bf16:
    case DType::f16: return 2;
    case DType::f32:
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::boolean: return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::bf16: return "bfloat16";
    case DType::f16: return "float16";
    case DType::f32: return "float32";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::boolean: return "bool";
  }
  return "unknown";
}

const char* device_name(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

TensorRef TensorRef::contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                                Device device, int device_index) {
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int>(shape.size());
  t.device = device;
  t.device_index = device_index;
  // The descriptor holds kMaxRank extents: a longer shape keeps its rank,
  // which every call refuses, and only its first kMaxRank extents (writing
  // the rest overran shape and stride into device, device_index and past
  // the object).
  int d = 0;
  for (std::int64_t extent : shape) {
    if (d == kMaxRank) break;
    t.shape[d++] = extent;
  }
  // A step past int64 wraps (by __builtin_mul_overflow; signed overflow is
  // undefined): no such descriptor passes a call's checks, its numel() is -1.
  std::int64_t step = 1;
  for (int i = d - 1; i >= 0; --i) {
    t.stride[i] = step;
    (void)__builtin_mul_overflow(step, t.shape[i], &step);
  }
  return t;
}

namespace {

// The axes a loop may visit: a rank outside [0, kMaxRank] is bad input that
// the checks report, and must not send a loop past the shape array.
int axes(int rank) { return rank < 0 ? 0 : rank > kMaxRank ? kMaxRank : rank; }

}  // namespace

std::int64_t TensorRef::numel() const {
  bool empty = false;
  for (int i = 0; i < axes(rank); ++i) {
    if (shape[i] < 0) return -1;
    empty = empty || shape[i] == 0;
  }
  if (empty) return 0;
  std::int64_t n = 1;
  for (int i = 0; i < axes(rank); ++i)
    if (__builtin_mul_overflow(n, shape[i], &n)) return -1;
  return n;
}

bool TensorRef::is_contiguous() const {
  // Once the step over the inner axes passes the int64 range, no stride can
  // equal it: only extent-1 axes may follow.
  std::int64_t step = 1;
  bool beyond = false;
  for (int i = axes(rank) - 1; i >= 0; --i) {
    if (shape[i] != 1 && (beyond || stride[i] != step)) return false;
    beyond = beyond || __builtin_mul_overflow(step, shape[i], &step);
  }
  return true;
}

// Built with std::to_string, not iostreams: a Python extension linked with a
// static libstdc++ (the GPU machine's toolchain) crashed in its first
// ostringstream once numpy was loaded.
std::string TensorRef::shape_string() const {
  if (rank != axes(rank)) return "(no shape: rank outside [0, " + std::to_string(kMaxRank) + "])";
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace vsa
