// Warp-level tile products on mma.sync m16n8k16 with operands in swizzled
// shared tiles (tile_producer.cuh), the two shapes both directions of
// attention are made of:
//
//   warp_scores:     S  = A · Bᵀ   A: the warp's rows of one tile, B: 8·kColTiles rows
//                                  of another, the reduction over D (S = Q·Kᵀ
//                                  forward; Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ backward)
//   warp_accumulate: C += P · B    P: score accumulators (the A operand, packed
//                                  in registers), B: 8·kKeyTiles rows × D of a tile
//                                  (O += P·V forward; dQ += dS·K in the dQ pass)
//   warp_accumulate_shared:        the same with P staged in a shared tile, so
//                                  the warps that computed P need not be the
//                                  ones that use it (the portable key pass:
//                                  dV += Pᵀ·dO, dK += dSᵀ·Q over 32 keys × D/2)
//   warp_accumulate_transposed:    the same with P read transposed out of a
//                                  Pᵀ tile (dQ += dS·K from a stored dSᵀ tile)
//
// warp_scores and warp_accumulate_shared run one loop (warp_mma_shared), which
// reads B as stored or transposed.
//
// Fragment bookkeeping (m16n8 accumulators): lane l holds rows g = l/4 and
// g + 8 of its row tile, columns 2·(l%4) and 2·(l%4)+1 of each 8-column tile;
// e = 0,1 are row g, e = 2,3 row g + 8.
#pragma once

#include <cstdint>

#include "cuda/common/numeric.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/sm80/tile_producer.cuh"

namespace vsa::cuda::sm80 {

// c += A · B over kDepth, both operands in swizzled shared tiles, read through
// the lane's readers: A's row tile m at a_rows.at(16m, 2kk) (a [rows][kDepth]
// tile), or with kTransA at a_rows.at(16kk, 2m) from a [kDepth][rows] tile,
// read transposed; B's column tiles 2·pair and 2·pair + 1 at b_rows.at(16·pair, 2kk)
// from a [columns][kDepth] tile, or with kTransB at b_rows.at(16kk, 2·pair)
// from a [kDepth][columns] tile, read transposed.
template <class Elem, bool kTransB, int kDepth, bool kTransA = false, int kRowTiles, int kColTiles, class ReaderA,
          class ReaderB>
__device__ __forceinline__ void warp_mma_shared(float (&c)[kRowTiles][kColTiles][4], const ReaderA& a_rows,
                                                const ReaderB& b_rows) {
#pragma unroll
  for (int kk = 0; kk < kDepth / 16; ++kk) {
    std::uint32_t a[kRowTiles][4];
#pragma unroll
    for (int m = 0; m < kRowTiles; ++m) {
      if constexpr (kTransA)
        ptx::ldmatrix_x4_trans(a[m], a_rows.at(16 * kk, 2 * m));
      else
        ptx::ldmatrix_x4(a[m], a_rows.at(16 * m, 2 * kk));
    }
#pragma unroll
    for (int pair = 0; pair < kColTiles / 2; ++pair) {
      std::uint32_t b[4];
      if constexpr (kTransB)
        ptx::ldmatrix_x4_trans(b, b_rows.at(16 * kk, 2 * pair));
      else
        ptx::ldmatrix_x4(b, b_rows.at(16 * pair, 2 * kk));
#pragma unroll
      for (int m = 0; m < kRowTiles; ++m) {
        ptx::mma_16x8x16<ElemTraits<Elem>::kIsBf16>(c[m][2 * pair], a[m], b[0], b[1]);
        ptx::mma_16x8x16<ElemTraits<Elem>::kIsBf16>(c[m][2 * pair + 1], a[m], b[2], b[3]);
      }
    }
  }
}

// s[m][t] = rows a_row0 + 16m.. of `sa` times rows 8t.. of `sb`, over D.
template <class Elem, int kHeadDim, int kRowTiles, int kColTiles>
__device__ __forceinline__ void warp_scores(const Elem* sa, int a_row0, const Elem* sb,
                                            float (&s)[kRowTiles][kColTiles][4], int lane) {
  using Reader = SwizzledReader<Elem, kHeadDim>;
#pragma unroll
  for (int m = 0; m < kRowTiles; ++m)
#pragma unroll
    for (int t = 0; t < kColTiles; ++t) s[m][t][0] = s[m][t][1] = s[m][t][2] = s[m][t][3] = 0.0f;
  const Reader a_rows(sa, a_row0 + (lane % 8) + ((lane / 8) % 2) * 8, lane / 16);
  const Reader b_rows(sb, (lane % 8) + (lane / 16) * 8, (lane / 8) % 2);
  warp_mma_shared<Elem, false, kHeadDim>(s, a_rows, b_rows);
}

// c += p · (rows 0..8·kKeyTiles-1 of `sb`): the accumulators of two adjacent
// 8-column score tiles form one 16-wide A fragment.
template <class Elem, int kHeadDim, int kRowTiles, int kKeyTiles>
__device__ __forceinline__ void warp_accumulate(float (&c)[kRowTiles][kHeadDim / 8][4],
                                                const float (&p)[kRowTiles][kKeyTiles][4], const Elem* sb,
                                                int lane) {
  const SwizzledReader<Elem, kHeadDim> b_rows(sb, (lane % 8) + ((lane / 8) % 2) * 8, lane / 16);
#pragma unroll
  for (int kk = 0; kk < kKeyTiles / 2; ++kk) {
    std::uint32_t a[kRowTiles][4];
#pragma unroll
    for (int m = 0; m < kRowTiles; ++m) {
      a[m][0] = ElemTraits<Elem>::pack(p[m][2 * kk][0], p[m][2 * kk][1]);
      a[m][1] = ElemTraits<Elem>::pack(p[m][2 * kk][2], p[m][2 * kk][3]);
      a[m][2] = ElemTraits<Elem>::pack(p[m][2 * kk + 1][0], p[m][2 * kk + 1][1]);
      a[m][3] = ElemTraits<Elem>::pack(p[m][2 * kk + 1][2], p[m][2 * kk + 1][3]);
    }
#pragma unroll
    for (int pair = 0; pair < kHeadDim / 16; ++pair) {
      std::uint32_t b[4];
      ptx::ldmatrix_x4_trans(b, b_rows.at(16 * kk, 2 * pair));
#pragma unroll
      for (int m = 0; m < kRowTiles; ++m) {
        ptx::mma_16x8x16<ElemTraits<Elem>::kIsBf16>(c[m][2 * pair], a[m], b[0], b[1]);
        ptx::mma_16x8x16<ElemTraits<Elem>::kIsBf16>(c[m][2 * pair + 1], a[m], b[2], b[3]);
      }
    }
  }
}

// c += rows a_row0.. of `sa` ([rows][kDepth]) times columns 8·col_tile0.. of `sb`
// ([kDepth][kHeadDim]), over kDepth. col_tile0 is a multiple of kColTiles (a
// power of two up to 8), so the lane's B address takes the warp's columns
// once: their 128-byte part on the tile, their chunk bits XORed into the
// swizzle (disjoint from the bits of each read's chunk), and every read's
// chunk stays a constant.
template <class Elem, int kDepth, int kHeadDim, int kRowTiles, int kColTiles>
__device__ __forceinline__ void warp_accumulate_shared(float (&c)[kRowTiles][kColTiles][4], const Elem* sa,
                                                       int a_row0, const Elem* sb, int col_tile0, int lane) {
  static_assert(kColTiles <= 8 && (kColTiles & (kColTiles - 1)) == 0, "a warp's columns lie in one 128-byte run");
  const SwizzledReader<Elem, kDepth> a_rows(sa, a_row0 + (lane % 8) + ((lane / 8) % 2) * 8, lane / 16);
  const SwizzledReader<Elem, kHeadDim> b_rows(sb + (col_tile0 >> 3) * 64, (lane % 8) + ((lane / 8) % 2) * 8,
                                              (lane / 16) ^ (col_tile0 & 7));
  warp_mma_shared<Elem, true, kDepth>(c, a_rows, b_rows);
}

// c += (query rows 16·row_tile.. of the transpose of `sa`, a [kDepth][kRows] tile) times `sb`
// ([kDepth][kHeadDim]), over kDepth: the portable stored-dS dQ pass's dQ += dS·K, with dS read
// transposed out of a stored dSᵀ tile. The row tile's chunk bits go into the A reader's swizzle
// (2·row_tile is even and below 8), so its reads take chunk 0.
template <class Elem, int kDepth, int kRows, int kHeadDim>
__device__ __forceinline__ void warp_accumulate_transposed(float (&c)[1][kHeadDim / 8][4], const Elem* sa, int row_tile,
                                                           const Elem* sb, int lane) {
  static_assert(kRows <= 64, "the row tiles' chunks lie in one 128-byte run");
  const SwizzledReader<Elem, kRows> a_rows(sa, (lane % 8) + (lane / 16) * 8, ((lane / 8) % 2) | (2 * row_tile));
  const SwizzledReader<Elem, kHeadDim> b_rows(sb, (lane % 8) + ((lane / 8) % 2) * 8, lane / 16);
  warp_mma_shared<Elem, true, kDepth, true>(c, a_rows, b_rows);
}

}  // namespace vsa::cuda::sm80
