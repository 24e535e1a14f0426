#include "tensor_ref.hpp"

#include "vsa/error.hpp"

namespace nb = nanobind;

namespace vsa::python {
namespace {

// Every dtype a vsa argument takes; which one an argument takes, the core then checks.
const char* kDtypes =
    "a dtype vsa takes: bfloat16, float16 or float32 for tokens and means; int32 or int64 for "
    "lists, counts and sizes; bool for block maps";

[[noreturn]] void unsupported_dtype(const char* name, const std::string& got) {
  throw Error(ErrorKind::unsupported, std::string(name) + ".dtype", kDtypes, got);
}

// "float64", "uint8", ... for the error message.
std::string dlpack_dtype_name(nb::dlpack::dtype dt) {
  using Code = nb::dlpack::dtype_code;
  const char* kind = nullptr;
  switch (static_cast<Code>(dt.code)) {
    case Code::Int: kind = "int"; break;
    case Code::UInt: kind = "uint"; break;
    case Code::Float: kind = "float"; break;
    case Code::Bfloat: kind = "bfloat"; break;
    case Code::Complex: kind = "complex"; break;
    case Code::Bool: kind = "bool"; break;
    default: return "DLPack type code " + std::to_string(dt.code);
  }
  std::string name = kind + std::to_string(dt.bits);
  return dt.lanes == 1 ? name : name + "x" + std::to_string(dt.lanes);
}

DType to_dtype(nb::dlpack::dtype dt, const char* name) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(dt.code);
  if (dt.lanes == 1) {
    if (code == Code::Bfloat && dt.bits == 16) return DType::bf16;
    if (code == Code::Float && dt.bits == 16) return DType::f16;
    if (code == Code::Float && dt.bits == 32) return DType::f32;
    if (code == Code::Int && dt.bits == 32) return DType::i32;
    if (code == Code::Int && dt.bits == 64) return DType::i64;
    if (code == Code::Bool && dt.bits == 8) return DType::boolean;
  }
  unsupported_dtype(name, dlpack_dtype_name(dt));
}

DType to_dtype(const std::string& dtype, const char* name) {
  for (DType d : {DType::bf16, DType::f16, DType::f32, DType::i32, DType::i64, DType::boolean})
    if (dtype == dtype_name(d)) return d;
  unsupported_dtype(name, dtype);
}

Device to_device(int dlpack_device_type, const std::string& got, const char* name) {
  // Pinned host memory is ordinary CPU memory to the CPU backend.
  if (dlpack_device_type == nb::device::cpu::value ||
      dlpack_device_type == nb::device::cuda_host::value)
    return Device::cpu;
  if (dlpack_device_type == nb::device::cuda::value) return Device::cuda;
  throw Error(ErrorKind::unsupported, std::string(name) + ".device", "a cpu or cuda tensor", got);
}

void set_rank(TensorRef& t, std::size_t rank, const char* name) {
  if (rank > static_cast<std::size_t>(kMaxRank))
    throw Error(ErrorKind::invalid_argument, name, "rank " + std::to_string(kMaxRank) + " or less",
                "rank " + std::to_string(rank));
  t.rank = static_cast<int>(rank);
}

template <typename Array>
TensorRef from_array(const Array& a, const char* name) {
  TensorRef t;
  // DLPack offers a null pointer for tensors with no elements; the core then
  // reports the argument as empty.
  t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  t.dtype = to_dtype(a.dtype(), name);
  set_rank(t, a.ndim(), name);
  for (int i = 0; i < t.rank; ++i) {
    t.shape[i] = static_cast<std::int64_t>(a.shape(i));
    t.stride[i] = a.stride(i);  // DLPack strides count elements, like TensorRef's
  }
  t.device = to_device(a.device_type(), "DLPack device type " + std::to_string(a.device_type()), name);
  t.device_index = a.device_id();
  return t;
}

}  // namespace

TensorRef to_tensor_ref(const InArray& array, const char* name) { return from_array(array, name); }
TensorRef to_tensor_ref(const OutArray& array, const char* name) { return from_array(array, name); }

TensorRef to_tensor_ref(const std::optional<InArray>& array, const char* name) {
  return array ? from_array(*array, name) : TensorRef{};
}

TensorRef to_tensor_ref(const std::optional<OutArray>& array, const char* name) {
  return array ? from_array(*array, name) : TensorRef{};
}

TensorRef to_tensor_ref(const TensorSpec& spec, const char* name) {
  const auto& [shape, strides, dtype, device, index] = spec;
  if (shape.size() != strides.size())
    throw Error(ErrorKind::invalid_argument, std::string(name) + ".stride",
                "one stride per dimension (" + std::to_string(shape.size()) + ")",
                std::to_string(strides.size()) + " strides");
  // A spec has no memory; the core only checks the pointer for null, and
  // 256-byte alignment keeps alignment checks about strides alone.
  alignas(256) static const unsigned char no_memory[1] = {};
  TensorRef t;
  t.data = const_cast<unsigned char*>(no_memory);
  t.dtype = to_dtype(dtype, name);
  set_rank(t, shape.size(), name);
  for (int i = 0; i < t.rank; ++i) {
    t.shape[i] = shape[i];
    t.stride[i] = strides[i];
  }
  if (device == "cpu") {
    t.device = Device::cpu;
  } else if (device == "cuda") {
    t.device = Device::cuda;
  } else {
    throw Error(ErrorKind::unsupported, std::string(name) + ".device", "a cpu or cuda tensor", device);
  }
  t.device_index = index;
  return t;
}

Layout to_layout(const std::string& layout) {
  if (layout == "bhsd") return Layout::bhsd;
  if (layout == "bshd") return Layout::bshd;
  throw Error(ErrorKind::invalid_argument, "layout", "'bhsd' or 'bshd'", "'" + layout + "'");
}

}  // namespace vsa::python
