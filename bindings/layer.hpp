// The VSA layer's stages (block means, coarse stage, gate combine and their
// gradients), over vsa/layer.hpp.
#pragma once

#include <nanobind/nanobind.h>

namespace vsa::python {

void bind_layer(nanobind::module_& m);

}  // namespace vsa::python
