// Where a phased list walk starts (list_walk.cuh): the list entry at which the
// CTA at place `cta` of the launch order begins its walk over `count` tiles,
// for `period` CTAs resident at once, the phase grown over the launch's first
// `ramp_waves` waves of them. Host-device, so a host test checks the function
// the kernel runs (tests/cuda/test_kernel_choice.cpp).
//
// The phase, (cta mod period) · count / period, puts CTAs that start at a
// steady rate at the same place in their walks. A launch's first waves do
// not start at a steady rate: the first starts all at once and is in step in
// list order, and the start rate settles over a few waves. So wave w takes
// only w / ramp_waves of its phase (none in the first wave), and the waves
// from ramp_waves on the whole of it (docs/kernel-notes.md, "A phase that
// starts in step": an 8-wave launch 3.5 % faster where the whole phase from
// the first wave made it 4 % slower).
#pragma once

#include <cstdint>

#include "core/host_device.hpp"

namespace vsa::cuda {

// In [0, count) when count > 0, else 0; period 0: list order.
VSA_HOST_DEVICE inline int walk_start(std::int64_t cta, int period, int ramp_waves, int count) {
  if (period <= 0 || count <= 0) return 0;
  std::int64_t start = cta % period * count / period;
  const std::int64_t wave = cta / period;
  if (wave < ramp_waves) start = start * wave / ramp_waves;
  return static_cast<int>(start);
}

}  // namespace vsa::cuda
