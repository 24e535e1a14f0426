// vsa::Error -> Python exceptions, by kind:
//   invalid_argument -> ValueError
//   unsupported      -> vsa._C.UnsupportedError (a NotImplementedError)
//   runtime          -> RuntimeError
// The message is the C++ one: it names the argument, the expected and the
// actual value.
#pragma once

#include <nanobind/nanobind.h>

namespace vsa::python {

void bind_errors(nanobind::module_& m);

}  // namespace vsa::python
