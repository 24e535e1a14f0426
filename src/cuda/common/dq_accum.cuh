// The layout of the backward's fp32 dQ accumulator: [B, H, Sq, D] cut into
// 64-row tiles (64·D floats each, in sequence order), and inside a tile the
// elements stored in the order a warpgroup's m64nD accumulator holds them.
//
// Thread τ (0..127; warp τ/32, lane τ%32) of a warpgroup holds, for each
// 8-column group t, rows 16·(τ/32) + (τ%32)/4 and that + 8, columns
// 8t + 2·(τ%4) and + 1: four floats, stored together as quad (t, τ). Quads go
// warp by warp (each warp's 16 rows one run of 16·D floats), then by column
// group, then by lane. So a tile is one contiguous run that the Hopper key
// pass stages in shared memory in this same order and adds by one bulk
// reduction — of only its first runs when the tile's last rows are padding
// (q_variable_block_sizes) — and the portable kernel's warps (whose m16n8
// fragments are the same per 16 rows) add with 16-byte reductions that are
// contiguous across a warp's lanes. dq_finish (backward/row_passes.cu) turns
// it back into rows.
#pragma once

#include <cstdint>

#include "cuda/common/block_lists.cuh"

namespace vsa::cuda {

// Float offset of quad (column group t, thread τ) inside a 64-row tile.
template <int kHeadDim>
__host__ __device__ constexpr int dq_quad_offset(int column_group, int thread) {
  return 4 * (thread / 32 * 32 * (kHeadDim / 8) + 32 * column_group + thread % 32);
}

// The quad stored at quad index `index` of a tile (its float offset / 4).
struct DqQuad {
  int column_group, thread;
};
template <int kHeadDim>
__host__ __device__ constexpr DqQuad dq_quad_at(int index) {
  constexpr int kWarpQuads = 32 * (kHeadDim / 8);
  return {index % kWarpQuads / 32, 32 * (index / kWarpQuads) + index % 32};
}

// Floats of the runs of the warps that hold a tile's first `rows` rows (16 per warp).
template <int kHeadDim>
__host__ __device__ constexpr int dq_rows_floats(int rows) {
  return (rows <= 0 ? 0 : rows >= kTileRows ? kTileRows / 16 : (rows + 15) / 16) * 16 * kHeadDim;
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

// dq_quad_at inverts dq_quad_offset, and the offsets cover the tile once.
template <int kHeadDim>
constexpr bool dq_layout_is_a_bijection() {
  for (int index = 0; index < kDqTileFloats<kHeadDim> / 4; ++index) {
    const DqQuad q = dq_quad_at<kHeadDim>(index);
    if (q.column_group >= kHeadDim / 8 || q.thread >= 128 ||
        dq_quad_offset<kHeadDim>(q.column_group, q.thread) != 4 * index)
      return false;
  }
  return true;
}
static_assert(dq_layout_is_a_bijection<64>() && dq_layout_is_a_bijection<128>());

}  // namespace vsa::cuda
