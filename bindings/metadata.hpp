// Block lists (map_to_index, invert_indices, topk_to_index) and the tiling of
// a video latent, over vsa/metadata.hpp.
#pragma once

#include <nanobind/nanobind.h>

namespace vsa::python {

void bind_metadata(nanobind::module_& m);

}  // namespace vsa::python
