// The order in which a CTA of a grid with one CTA per query tile (forward v2)
// walks its tile's list: from its first tile, or, phased, from a tile set by
// the CTA's place in the launch order.
//
// Why a phase (docs/kernel-notes.md, "The list walk's phase"): lists are
// sorted (topk_to_index, the VSA layer's coarse stage), so a walk goes over
// its head's K/V from the first block to the last. The CTAs resident at once
// share a head, but over a long launch they come to start at different times,
// so in list order they sit at different places in their walks and together
// read all of the head's K/V; where that is larger than L2, much of it comes
// from DRAM on every walk (a HunyuanVideo 720p head: 69 MB; 61 % of the
// forward's L2 reads hit). In a long launch CTAs start at a steady rate of
// `period` (the CTAs resident at once) per walk's time T, so CTA L starts at
// about L·T/period; starting its walk at the fraction (L mod period)/period of
// its list puts it, at time t, at the fraction t/T of its walk, like every
// other resident CTA: together they read one window of the head (90 % of the
// reads hit; HunyuanVideo's forward 13 % faster). A launch's first waves start
// together, in step in list order, and a whole phase would spread them, so the
// phase grows over the first waves (walk_start.hpp); kernel_choice.hpp phases
// only launches of several waves over large heads.
//
// The sum over the list then runs in another order, but one fixed by the
// CTA's grid place and the period (the device's SM count), so a call is still
// bitwise repeatable on one device.
#pragma once

#include <cstdint>

#include "cuda/common/walk_start.hpp"

namespace vsa::cuda {

class ListWalk {
 public:
  // period: the CTAs resident at once (the phased SMs times the kernel's CTAs
  // per SM), or 0 for list order; ramp_waves: the waves over which the phase
  // grows (walk_start.hpp); count: the list's tiles.
  __device__ ListWalk(int period, int ramp_waves, int count)
      : count_(count),
        start_(walk_start(blockIdx.x + static_cast<std::int64_t>(gridDim.x) *
                                           (blockIdx.y + static_cast<std::int64_t>(gridDim.y) * blockIdx.z),
                          period, ramp_waves, count)) {}

  // The list's tile that step `step` of the walk visits; a step past the list
  // is itself (the schedulers' lookups give nothing there).
  __device__ int tile_at(int step) const {
    const int tile = step + start_;
    return step >= count_ ? step : tile < count_ ? tile : tile - count_;
  }

 private:
  int count_, start_;
};

}  // namespace vsa::cuda
