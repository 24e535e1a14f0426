#include "cuda/backward/row_passes.hpp"

#include "cuda/common/block_lists.cuh"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/dq_accum.cuh"
#include "cuda/common/mean_grad_rows.cuh"
#include "cuda/common/numeric.cuh"

namespace vsa::cuda {
namespace {

constexpr int kThreads = 256;

// Row `position` of (batch · H + head) `bh` in a strided view.
__device__ __forceinline__ std::int64_t row_offset_in_head(const SeqStrides& st, std::int64_t bh, int heads,
                                                           std::int64_t position) {
  return (bh / heads) * st.batch + (bh % heads) * st.head + position * st.seq;
}

// Row r of [B, H, Sq] at its (batch, head, position) in a strided view.
__device__ __forceinline__ std::int64_t row_offset(const SeqStrides& st, std::int64_t row, int heads,
                                                   std::int64_t seq_q) {
  return row_offset_in_head(st, row / seq_q, heads, row % seq_q);
}

// A row is read by D/8 consecutive threads, 16 bytes each; their partial dot
// products meet by shuffles inside their aligned group of lanes.
template <class Elem, int kHeadDim>
__global__ void delta_kernel(const RowPassParams p) {
  constexpr int kLanes = kHeadDim / 8;
  const std::int64_t rows = static_cast<std::int64_t>(p.batch) * p.heads * p.seq_q;
  const std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes;
  const int part = static_cast<int>(threadIdx.x % kLanes);
  float sum = 0.0f;
  if (row < rows) {
    const uint4 o = *reinterpret_cast<const uint4*>(static_cast<const Elem*>(p.out) +
                                                    row_offset(p.out_stride, row, p.heads, p.seq_q) + 8 * part);
    const uint4 d = *reinterpret_cast<const uint4*>(static_cast<const Elem*>(p.dout) +
                                                    row_offset(p.dout_stride, row, p.heads, p.seq_q) + 8 * part);
    const std::uint32_t ow[4] = {o.x, o.y, o.z, o.w}, dw[4] = {d.x, d.y, d.z, d.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 a = ElemTraits<Elem>::unpack(ow[i]), b = ElemTraits<Elem>::unpack(dw[i]);
      sum = fmaf(a.x, b.x, fmaf(a.y, b.y, sum));
    }
  }
#pragma unroll
  for (int lanes = kLanes / 2; lanes > 0; lanes /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, lanes);
  if (row < rows && part == 0) p.delta[row] = sum;
}

// Where the 64-row tile from flat row first_row of [B·H·Sq] lies, worked out once (64-bit
// divisions and a q_variable_block_sizes load): its (batch · H + head) and its first row's
// position there, its query block (a tile lies in one), that block's real queries and the
// tile's first row in it.
struct TileInBlock {
  std::int64_t bh, position, q_block;
  int count, offset;
  __device__ TileInBlock(const RowPassParams& p, std::int64_t first_row) {
    bh = first_row / p.seq_q;
    position = first_row % p.seq_q;
    q_block = position / p.block;
    offset = static_cast<int>(position % p.block);
    count = query_block_count(p.q_vbs, p.q_vbs_is_64, q_block, p.block);
  }
  // The tile's real rows: all 64 without q_variable_block_sizes; <= 0 for a tile of padding only.
  __device__ int real_rows() const { return real_rows_from(count, offset, kTileRows); }
  // Its dq_mean addend.
  __device__ MeanGradRows mean_grad_rows(const RowPassParams& p, int head_dim) const {
    if (p.dq_mean == nullptr) return {};
    return vsa::cuda::mean_grad_rows(p.dq_mean, static_cast<int>(bh / p.heads), p.heads, static_cast<int>(bh % p.heads),
                                     p.num_q_blocks, q_block, count, count - offset, head_dim);
  }
};

// A CTA per 64-row tile (which lies in one query block, so its rows are consecutive in one
// (batch, head)); the tile's position, its row base and its addend are worked out once per
// thread, not per element (64-bit divisions: per 4-float quad they made this pass compute
// bound, 176 µs on Wan 480p's layer against ~85 µs for its bytes). A unit is 8 columns of two
// rows: lanes 4g .. 4g + 3 of a warp's run hold, in four consecutive quads (64 bytes),
// columns 8c .. 8c + 7 of rows 16w + g (x, y) and 16w + g + 8 (z, w), so a thread reads 64
// contiguous bytes and writes two 16-byte pieces of rows (dq's rows are 16-byte aligned:
// expect_aligned_rows), and a warp's eight g of four column groups write 64 bytes of 8 rows.
// Padding rows get exact zeros, as their sums are (their dS is 0), without their sums being
// read: a unit whose first row is padding reads nothing (real rows are a tile's first).
constexpr int kFinishThreads = 128;

template <class Elem, int kHeadDim>
__global__ void __launch_bounds__(kFinishThreads) dq_finish_kernel(const RowPassParams p) {
  constexpr int kGroups = kHeadDim / 8;                 // column groups of 8
  constexpr int kUnits = kTileRows / 16 * kGroups * 8;  // (warp run, column group, g)
  static_assert(kUnits % kFinishThreads == 0, "whole rounds of the CTA's threads");
  const std::int64_t tile = blockIdx.x, first_row = tile * kTileRows;
  const float4* quads = reinterpret_cast<const float4*>(p.dq_accum + first_row * kHeadDim);
  const TileInBlock place(p, first_row);
  Elem* const rows = static_cast<Elem*>(p.dq) + row_offset_in_head(p.dq_stride, place.bh, p.heads, place.position);
  const MeanGradRows add = place.mean_grad_rows(p, kHeadDim);
  const int real_rows = place.real_rows();
#pragma unroll
  for (int i = 0; i < kUnits / kFinishThreads; ++i) {
    const int unit = static_cast<int>(threadIdx.x) + kFinishThreads * i;
    const int g = unit % 8, group = unit / 8 % kGroups, run = unit / (8 * kGroups);
    const int quad0 = dq_quad_offset<kHeadDim>(group, 32 * run + 4 * g) / 4;
    const DqQuadPosition at = dq_quad_position(group, 32 * run + 4 * g);  // the first quad's: 2j columns on
    const int row = at.row, column = at.column;
    float4 v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = row < real_rows ? quads[quad0 + j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const auto store_row = [&](int r, auto first, auto second) {
      std::uint32_t packed[4];
#pragma unroll
      for (int j = 0; j < 4; ++j)
        packed[j] = ElemTraits<Elem>::pack(add.add_to(first(v[j]) * p.scale, r, column + 2 * j),
                                           add.add_to(second(v[j]) * p.scale, r, column + 2 * j + 1));
      *reinterpret_cast<uint4*>(rows + r * p.dq_stride.seq + column) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    };
    store_row(row, [](float4 q) { return q.x; }, [](float4 q) { return q.y; });
    store_row(row + 8, [](float4 q) { return q.z; }, [](float4 q) { return q.w; });
  }
}

unsigned blocks_for(std::int64_t threads) { return static_cast<unsigned>((threads + kThreads - 1) / kThreads); }

}  // namespace

template <class Elem, int kHeadDim>
void launch_delta(const RowPassParams& p, cudaStream_t stream) {
  const std::int64_t rows = static_cast<std::int64_t>(p.batch) * p.heads * p.seq_q;
  delta_kernel<Elem, kHeadDim><<<blocks_for(rows * (kHeadDim / 8)), kThreads, 0, stream>>>(p);
  check_launch("backward: delta_kernel");
}

template <class Elem, int kHeadDim>
void launch_dq_finish(const RowPassParams& p, cudaStream_t stream) {
  const std::int64_t tiles = static_cast<std::int64_t>(p.batch) * p.heads * p.seq_q / kTileRows;
  dq_finish_kernel<Elem, kHeadDim><<<static_cast<unsigned>(tiles), kFinishThreads, 0, stream>>>(p);
  check_launch("backward: dq_finish_kernel");
}

#define VSA_ROW_PASSES(Elem, D)                                          \
  template void launch_delta<Elem, D>(const RowPassParams&, cudaStream_t); \
  template void launch_dq_finish<Elem, D>(const RowPassParams&, cudaStream_t);
VSA_ROW_PASSES(__nv_bfloat16, 64)
VSA_ROW_PASSES(__nv_bfloat16, 128)
VSA_ROW_PASSES(__half, 64)
VSA_ROW_PASSES(__half, 128)
#undef VSA_ROW_PASSES

}  // namespace vsa::cuda
