// How arrays from Python become vsa::TensorRef views.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nanobind/ndarray.h>

#include "vsa/attention.hpp"

namespace vsa::python {

// Any DLPack-capable array (torch CPU/CUDA tensors, numpy arrays, ...).
// Inputs are read-only views; outputs must be writable.
using InArray = nanobind::ndarray<nanobind::ro>;
using OutArray = nanobind::ndarray<>;

// A tensor described without memory: (shape, strides in elements, dtype name,
// device type "cpu"/"cuda", device index). Lets `supported` answer for meta or
// fake tensors, which have no data to export.
using TensorSpec = std::tuple<std::vector<std::int64_t>, std::vector<std::int64_t>, std::string,
                              std::string, int>;

// `name` is the argument name used in error messages.
TensorRef to_tensor_ref(const InArray& array, const char* name);
TensorRef to_tensor_ref(const OutArray& array, const char* name);
// An absent optional becomes an undefined TensorRef (null data).
TensorRef to_tensor_ref(const std::optional<InArray>& array, const char* name);
TensorRef to_tensor_ref(const std::optional<OutArray>& array, const char* name);
TensorRef to_tensor_ref(const TensorSpec& spec, const char* name);

Layout to_layout(const std::string& layout);

// A CUDA stream handle passed from Python as an integer (0: the default stream).
inline void* as_stream(std::uintptr_t stream) { return reinterpret_cast<void*>(stream); }

}  // namespace vsa::python
