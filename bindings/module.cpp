// vsa._C: the C++ API for Python. Every function taking arrays follows one
// argument order: inputs, then outputs (allocated by the caller — the core
// allocates nothing), then scalars, then `stream` (a cudaStream_t as an int;
// ignored for CPU arrays). Compute runs with the GIL released.
#include <nanobind/nanobind.h>

#include "attention.hpp"
#include "cpu.hpp"
#include "errors.hpp"
#include "layer.hpp"
#include "metadata.hpp"

NB_MODULE(_C, m) {
  m.doc() = "vsa: block-sparse attention (C++ core, CPU and CUDA backends)";
  vsa::python::bind_errors(m);
  vsa::python::bind_attention(m);
  vsa::python::bind_cpu(m);
  vsa::python::bind_metadata(m);
  vsa::python::bind_layer(m);
}
