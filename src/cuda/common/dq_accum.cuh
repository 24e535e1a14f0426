// The layout of the backward's fp32 dQ accumulator: [B, H, Sq, D] cut into
// 64-row tiles (64·D floats each, in sequence order), and inside a tile the
// elements stored in the order a warpgroup's m64nD accumulator holds them.
//
// Thread τ (0..127; warp τ/32, lane τ%32) of a warpgroup holds, for each
// 8-column group t, rows 16·(τ/32) + (τ%32)/4 and that + 8, columns
// 8t + 2·(τ%4) and + 1: four floats, stored together as quad (t, τ) at
// 4·(128·t + τ). So a tile is one contiguous run that the Hopper key pass
// stages in shared memory in this same order and adds by one bulk reduction,
// and the portable kernel's warps (whose m16n8 fragments are the same per 16
// rows) add with 16-byte reductions that are contiguous across threads.
// dq_finish (backward/row_passes.cu) turns it back into rows.
#pragma once

#include <cstdint>

#include "cuda/common/block_lists.cuh"

namespace vsa::cuda {

// Float offset of quad (column group t, thread τ) inside a 64-row tile.
__host__ __device__ constexpr int dq_quad_offset(int column_group, int thread) {
  return 4 * (128 * column_group + thread);
}

// The tile's element (row, column) of quad element e (0,1: first row; 2,3: row + 8).
struct DqQuadPosition {
  int row, column;
};
__host__ __device__ constexpr DqQuadPosition dq_quad_position(int column_group, int thread) {
  return {16 * (thread / 32) + (thread % 32) / 4, 8 * column_group + 2 * (thread % 4)};
}

// Floats of one 64-row tile.
template <int kHeadDim>
constexpr int kDqTileFloats = kTileRows * kHeadDim;

}  // namespace vsa::cuda
