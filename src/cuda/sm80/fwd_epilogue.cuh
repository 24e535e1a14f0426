// Epilogue of the forward kernels (the portable one and the Hopper ones):
// normalize O by the row sums, write it through shared memory as 16-byte
// coalesced stores, and write the base-2 LSE. Rows that saw no key get O = 0
// and lse = kEmptyRowLse, and so do padding rows (q_variable_block_sizes,
// write_output's real_rows), selected as they are copied out: the main loops
// compute them like any row (whatever their q holds, it stays in its row),
// so the mask costs nothing per tile. With the fused gate combine (CtaOutputs::coarse),
// each staged chunk of 8 rounded outputs becomes fine + coarse · gate on its
// way out: the arithmetic of the combine kernel (layer/gate_combine.cu), so
// the same bits, without a second pass over out. With CtaOutputs::fine the
// rounded attention is stored there too (the layer's training path keeps it
// for the backward's delta).
#pragma once

#include <cstdint>

#include "core/layer_arithmetic.hpp"
#include "cuda/common/numeric.cuh"
#include "cuda/common/query_scheduler.cuh"
#include "cuda/layer/vector_io.cuh"
#include "cuda/sm80/fwd_consumer.cuh"
#include "vsa/attention.hpp"

namespace vsa::cuda::sm80 {

// Asks L2 for the CTA's gate rows at the start of the kernel, so the
// epilogue's gate loads hit L2 instead of waiting on memory at the end of
// the CTA (where nothing of this CTA is left to overlap them). Without the
// fused combine (or without a gate) it does nothing. The `threads` threads
// that own the tile share the requests (`thread`: this one's index among them).
template <class Elem, int kHeadDim, int kCtaRows>
__device__ __forceinline__ void prefetch_gate_rows(const FwdKernelParams& p, const QueryScheduler<kCtaRows>& sched,
                                                   int thread, int threads) {
  if (p.coarse == nullptr || p.gate == nullptr) return;
  const CtaOutputs<Elem> dst = cta_outputs<Elem, kHeadDim>(p, sched);
  constexpr int kLineElems = 128 / static_cast<int>(sizeof(Elem));  // one 128-byte L2 line
  constexpr int kLines = kHeadDim / kLineElems;                      // per gate row: 1 or 2
  for (int i = thread; i < kCtaRows * kLines; i += threads)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(dst.gate + (i / kLines) * dst.gate_row_stride +
                                                   (i % kLines) * kLineElems));
}

// The copy-out of a warp's staged rows with the gate combine applied: each
// 16-byte chunk is the rounded attention plus the CTA's coarse row times the
// row's gate (1 without a gate), rounded once more; the rounded attention
// itself goes to dst.fine when that is set. Every gate chunk of the
// lane is loaded before the first store: out may alias gate as far as the
// compiler knows, so loads between stores would each wait a full memory
// round trip.
template <class Elem, class Tile, int kLaneChunks>
__device__ __forceinline__ void store_combined_rows(const Elem* stage, int row0, int lane,
                                                    const CtaOutputs<Elem>& dst, int real_rows) {
  const int chunk = lane % Tile::kChunks;  // the same chunk on every pass: 32 lanes cover whole rows
  const auto row_of = [&](int k) { return row0 + (lane + 32 * k) / Tile::kChunks; };
  uint4 gate_raw[kLaneChunks];
  if (dst.gate != nullptr) {
#pragma unroll
    for (int k = 0; k < kLaneChunks; ++k)
      gate_raw[k] = __ldg(reinterpret_cast<const uint4*>(dst.gate + row_of(k) * dst.gate_row_stride + 8 * chunk));
  }
  float coarse[8];
  layer::load8(dst.coarse + 8 * chunk, coarse);
#pragma unroll
  for (int k = 0; k < kLaneChunks; ++k) {
    const int row = row_of(k);
    float fine[8], gate[8] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    layer::load8(stage + Tile::offset(row, chunk), fine);
    if (row >= real_rows) {  // a padding row: the attention part is 0 (its staged O may be NaN)
#pragma unroll
      for (int e = 0; e < 8; ++e) fine[e] = 0.0f;
    }
    if (dst.fine != nullptr) layer::store8(dst.fine + row * dst.fine_row_stride + 8 * chunk, fine);
    if (dst.gate != nullptr) layer::unpack8<Elem>(gate_raw[k], gate);
#pragma unroll
    for (int e = 0; e < 8; ++e) fine[e] = detail::combine_step(fine[e], coarse[e], gate[e]);
    layer::store8(dst.out + row * dst.out_row_stride + 8 * chunk, fine);
  }
}

// `stage` is the CTA's shared Q tile: each warp stages its output rows over
// its own Q rows, which no other warp reads, so no CTA barrier is needed.
// Rows of the CTA from `real_rows` on are padding (QueryScheduler::real_rows;
// a separate argument: one more CtaOutputs field made the portable D = 128
// kernel spill in its main loop).
template <class Elem, int kHeadDim, int kRowTiles, int kKeys>
__device__ void write_output(const FwdConsumer<Elem, kHeadDim, kRowTiles, kKeys>& c, Elem* stage,
                             const CtaOutputs<Elem>& dst, int real_rows) {
  using Consumer = FwdConsumer<Elem, kHeadDim, kRowTiles, kKeys>;
  using Tile = typename Consumer::Tile;
  const int lane = c.lane();
  const int row0 = c.warp_row0();
  float inv_sum[Consumer::kRowSlots], lse[Consumer::kRowSlots];
#pragma unroll
  for (int r = 0; r < Consumer::kRowSlots; ++r) {
    float sum = c.row_sum(r);
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    inv_sum[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
    lse[r] = sum > 0.0f ? c.row_max(r) + log2f(sum) : kEmptyRowLse;
  }

#pragma unroll
  for (int t = 0; t < Consumer::kDimTiles; ++t) {
#pragma unroll
    for (int r = 0; r < Consumer::kRowSlots; ++r) {
      const int m = r / 2, h = r % 2;
      const int row = row0 + lane / 4 + 8 * r;
      const int col = 2 * (lane % 4);
      *reinterpret_cast<std::uint32_t*>(stage + Tile::offset(row, t) + col) =
          ElemTraits<Elem>::pack(c.o()[m][t][2 * h] * inv_sum[r], c.o()[m][t][2 * h + 1] * inv_sum[r]);
    }
  }
  __syncwarp();
  constexpr int kLaneChunks = Consumer::kWarpRows * Tile::kChunks / 32;
  static_assert(Consumer::kWarpRows * Tile::kChunks % 32 == 0 && 32 % Tile::kChunks == 0,
                "a warp's lanes cover whole staged rows");
  if (dst.coarse != nullptr) {
    store_combined_rows<Elem, Tile, kLaneChunks>(stage, row0, lane, dst, real_rows);
  } else {
#pragma unroll
    for (int i = lane; i < Consumer::kWarpRows * Tile::kChunks; i += 32) {
      const int row = row0 + i / Tile::kChunks;
      const int chunk = i % Tile::kChunks;
      // Selected, not multiplied by 0: a padding row's staged O may be NaN.
      *reinterpret_cast<uint4*>(dst.out + row * dst.out_row_stride + chunk * 8) =
          row < real_rows ? *reinterpret_cast<const uint4*>(stage + Tile::offset(row, chunk))
                              : make_uint4(0, 0, 0, 0);
    }
  }
  if (dst.lse != nullptr && lane % 4 == 0) {
#pragma unroll
    for (int r = 0; r < Consumer::kRowSlots; ++r) {
      const int row = row0 + lane / 4 + 8 * r;
      dst.lse[row] = row < real_rows ? lse[r] : kEmptyRowLse;
    }
  }
}

}  // namespace vsa::cuda::sm80
