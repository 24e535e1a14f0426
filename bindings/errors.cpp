#include "errors.hpp"

#include "vsa/error.hpp"

namespace nb = nanobind;

namespace vsa::python {
namespace {

void translate(const std::exception_ptr& error, void* unsupported_type) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    PyObject* type = PyExc_RuntimeError;
    if (e.kind() == ErrorKind::invalid_argument) type = PyExc_ValueError;
    if (e.kind() == ErrorKind::unsupported) type = static_cast<PyObject*>(unsupported_type);
    PyErr_SetString(type, e.what());
  }
}

}  // namespace

void bind_errors(nb::module_& m) {
  // Lives as long as the module (the module holds a reference).
  PyObject* unsupported = PyErr_NewExceptionWithDoc(
      "vsa._C.UnsupportedError",
      "Valid input that no backend of this build can run (dtype, head dim, device, arch, ...).",
      PyExc_NotImplementedError, nullptr);
  m.attr("UnsupportedError") = nb::steal(unsupported);
  nb::register_exception_translator(translate, unsupported);
}

}  // namespace vsa::python
