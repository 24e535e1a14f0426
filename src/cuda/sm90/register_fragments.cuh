// A warp's m16n8 accumulators over 8·kColTiles columns, repacked as the
// register A operand of wgmma (k16 steps of 16 columns, 16-bit pairs): how
// P or dS, just computed in registers, feeds the next product (O += P·V,
// dV += Pᵀ·dO, dK += dSᵀ·Q, dQ += dS·K) without a trip through shared memory.
#pragma once

#include <cstdint>

#include "cuda/common/numeric.cuh"

namespace vsa::cuda::sm90 {

template <class Elem, int kColTiles>
__device__ __forceinline__ void pack_a(const float (&x)[1][kColTiles][4], std::uint32_t (&a)[kColTiles / 2][4]) {
#pragma unroll
  for (int kk = 0; kk < kColTiles / 2; ++kk) {
    a[kk][0] = ElemTraits<Elem>::pack(x[0][2 * kk][0], x[0][2 * kk][1]);
    a[kk][1] = ElemTraits<Elem>::pack(x[0][2 * kk][2], x[0][2 * kk][3]);
    a[kk][2] = ElemTraits<Elem>::pack(x[0][2 * kk + 1][0], x[0][2 * kk + 1][1]);
    a[kk][3] = ElemTraits<Elem>::pack(x[0][2 * kk + 1][2], x[0][2 * kk + 1][3]);
  }
}

}  // namespace vsa::cuda::sm90
