#include "cuda/backward/row_passes.hpp"

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/dq_accum.cuh"
#include "cuda/common/mean_grad_rows.cuh"
#include "cuda/common/numeric.cuh"

namespace vsa::cuda {
namespace {

constexpr int kThreads = 256;

// Row r of [B, H, Sq] at its (batch, head, position) in a strided view.
__device__ __forceinline__ std::int64_t row_offset(const SeqStrides& st, std::int64_t row, int heads,
                                                   std::int64_t seq_q) {
  const std::int64_t bh = row / seq_q;
  return (bh / heads) * st.batch + (bh % heads) * st.head + (row % seq_q) * st.seq;
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

// The dq_mean addend of the 64-row tile from flat row first_row of [B·H·Sq] (a tile lies in
// one query block).
__device__ __forceinline__ MeanGradRows tile_mean_grad_rows(const RowPassParams& p, std::int64_t first_row,
                                                            int head_dim) {
  if (p.dq_mean == nullptr) return {};
  const std::int64_t bh = first_row / p.seq_q, position = first_row % p.seq_q, q_block = position / p.block;
  const int count = query_block_count(p.q_vbs, p.q_vbs_is_64, q_block, p.block);
  return mean_grad_rows(p.dq_mean, static_cast<int>(bh / p.heads), p.heads, static_cast<int>(bh % p.heads),
                        p.num_q_blocks, q_block, count, count - static_cast<int>(position % p.block), head_dim);
}

// One thread per accumulator quad: two element pairs, rows r and r + 8.
template <class Elem, int kHeadDim>
__global__ void dq_finish_kernel(const RowPassParams p) {
  constexpr int kTileQuads = kDqTileFloats<kHeadDim> / 4;
  const std::int64_t quad = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (quad >= static_cast<std::int64_t>(p.batch) * p.heads * p.seq_q / kTileRows * kTileQuads) return;
  const std::int64_t tile = quad / kTileQuads;
  const int index = static_cast<int>(quad % kTileQuads);
  const DqQuad quad_at = dq_quad_at<kHeadDim>(index);
  const DqQuadPosition at = dq_quad_position(quad_at.column_group, quad_at.thread);
  const float4 v = *reinterpret_cast<const float4*>(p.dq_accum + 4 * quad);
  Elem* dst = static_cast<Elem*>(p.dq) + row_offset(p.dq_stride, tile * kTileRows + at.row, p.heads, p.seq_q) +
              at.column;
  const MeanGradRows add = tile_mean_grad_rows(p, tile * kTileRows, kHeadDim);
  *reinterpret_cast<std::uint32_t*>(dst) = ElemTraits<Elem>::pack(add.add_to(v.x * p.scale, at.row, at.column),
                                                                   add.add_to(v.y * p.scale, at.row, at.column + 1));
  *reinterpret_cast<std::uint32_t*>(dst + 8 * p.dq_stride.seq) = ElemTraits<Elem>::pack(
      add.add_to(v.z * p.scale, at.row + 8, at.column), add.add_to(v.w * p.scale, at.row + 8, at.column + 1));
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
  const std::int64_t quads = static_cast<std::int64_t>(p.batch) * p.heads * p.seq_q * kHeadDim / 4;
  dq_finish_kernel<Elem, kHeadDim><<<blocks_for(quads), kThreads, 0, stream>>>(p);
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
