// Umbrella header of the vsa C++ API.
#pragma once

#include "vsa/attention.hpp"
#include "vsa/cpu.hpp"
#include "vsa/error.hpp"
#include "vsa/layer.hpp"
#include "vsa/metadata.hpp"
#include "vsa/tensor.hpp"
