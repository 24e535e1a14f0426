// forward / backward / supported and the build facts, over vsa/attention.hpp.
#pragma once

#include <nanobind/nanobind.h>

namespace vsa::python {

void bind_attention(nanobind::module_& m);

}  // namespace vsa::python
