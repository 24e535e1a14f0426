// The CPU backend's settings and facts, over vsa/cpu.hpp.
#pragma once

#include <nanobind/nanobind.h>

namespace vsa::python {

void bind_cpu(nanobind::module_& m);

}  // namespace vsa::python
