// The Hopper forward's work on one key tile (64 keys; or a whole 128-token
// block in fwd_pair_kernel.cuh), shared by v2 (fwd_tma_kernel.cuh), the v3
// experiment (fwd_ws_kernel.cuh) and the 128-token-block kernel, whose
// kernels keep the loads, the barriers and the epilogue. One warpgroup issues
// S = Q·Kᵀ (8 or 4 wgmma m64n<keys>k16, both operands from shared memory)
// and O += P·V (keys/16 wgmma m64nDk16, P from registers, V MN-major), and
// turns S into P with the online softmax of the portable consumer (a warp of
// a warpgroup holds its 16 rows as the m16n8 fragments that kernel uses).
//
// Two loop orders use it. Serial (v2): S(t), the softmax, P(t)·V(t), each
// product waited for (scores_waited, softmax_into_p, pv_waited). Overlapped
// (v3, the 128-token-block kernel): the softmax of tile t runs while P·V of
// tile t−1 is on the tensor cores (scores_under_pv): P(t−1) waits in p_prev
// until that product is issued, and O is rescaled by tile t's new maxima in
// the next turn, between the issue of S(t+1) and of P(t)·V(t), under S's
// products (FA3's order; rescale_pending).
//
// The serial order can also take a tile of a partial block over its real
// keys' rows only (kWidth = 16 or 32 of its 64, the rows its real keys are
// in): S on a narrower wgmma (m64n16, m64n32), its softmax over those
// columns, P·V over as many k16 steps. The rows left out are padding, whose
// P would be 0.
#pragma once

#include <cstdint>

#include "cuda/common/numeric.cuh"
#include "cuda/sm80/fwd_consumer.cuh"
#include "cuda/sm90/register_fragments.cuh"
#include "cuda/sm90/swizzled_tile.cuh"

namespace vsa::cuda::sm90 {

// The order in which warpgroups issue their products: take() before a
// tile's products are issued, pass() after. Any order (v2, v3): nothing.
struct AnyOrder {
  __device__ void take() const {}
  __device__ void pass() const {}
};

// kRealKeysLast: a partial tile's real keys are its last ones (v2's K and V
// tiles, loaded with their padding as the box's zero rows); else its first.
// kSoftmaxUnderPv: the softmax runs while a P·V product is in flight (v3's
// order), so its exponentials must not land in S's registers (softmax_into_p
// says why); false for v2's serial loop, which waits for every product.
template <class Elem, int kHeadDim, int kKeys = kTileRows, bool kRealKeysLast = false,
          bool kSoftmaxUnderPv = kKeys == kTileRows>
struct FwdTileMath {
  using Consumer = sm80::FwdConsumer<Elem, kHeadDim, 1, kKeys>;
  static constexpr bool kBf16 = ElemTraits<Elem>::kIsBf16;

  Consumer consumer;
  typename Consumer::Scores s;
  // P(t−1), the A operand of the P·V product in flight; zero for a tile with
  // no real keys, so every tile issues the same products (ptxas serializes
  // products behind a branch it cannot follow).
  std::uint32_t p_prev[kKeys / 16][4];
  typename Consumer::template ScoresOf<kKeys / 16> s_half;
  typename Consumer::template ScoresOf<kKeys / 32> s_quarter;

  __device__ explicit FwdTileMath(int warp) : consumer(warp) {}

  __device__ float (&o())[kHeadDim / 2] {
    return reinterpret_cast<float(&)[kHeadDim / 2]>(consumer.accumulators());
  }
  // The scores of the tile's kWidth keys multiplied: s, or for a narrow tile
  // an array of its own (as part of s, its m64n16/m64n32 products were
  // serialized by ptxas: C7511, "insufficient register resources for the
  // wgmma pipeline").
  template <int kWidth = kKeys>
  __device__ typename Consumer::template ScoresOf<kWidth / 8>& scores() {
    if constexpr (kWidth == kKeys)
      return s;
    else if constexpr (kWidth == kKeys / 2)
      return s_half;
    else
      return s_quarter;
  }
  template <int kWidth = kKeys>
  __device__ float (&s_flat())[kWidth / 2] {
    return reinterpret_cast<float(&)[kWidth / 2]>(scores<kWidth>());
  }

  // S = Q·Kᵀ alone, waited for: every tile of a serial loop, tile 0 of an overlapped one.
  template <int kWidth = kKeys, class Order = AnyOrder>
  __device__ void scores_waited(std::uint32_t q_tile, std::uint32_t k_tile, const Order& order = {}) {
    wgmma_fence();
    order.take();
    issue_scores<kWidth>(q_tile, k_tile);
    order.pass();
    wgmma_wait<0>();
    fence_registers(s_flat<kWidth>());
  }
  // Tile t ≥ 1: S(t), then O += P(t−1)·V(t−1); waits only for S(t), the
  // older group, while the P·V product runs on (wait_pv ends it).
  template <class Order = AnyOrder>
  __device__ void scores_under_pv(std::uint32_t q_tile, std::uint32_t k_tile, std::uint32_t v_prev,
                                  const Order& order = {}) {
    fence_registers(o());
    wgmma_fence();
    order.take();
    issue_scores<kKeys>(q_tile, k_tile);
    rescale_pending();  // under S(t), off the softmax's path (FA3's order)
    issue_pv<kKeys>(v_prev);
    order.pass();
    wgmma_wait<1>();
    fence_registers(s_flat());
  }
  __device__ void wait_pv() {
    wgmma_wait<0>();
    fence_registers(o());
  }
  // O += P·V, waited for: every tile of a serial loop, the last of an overlapped one.
  template <int kWidth = kKeys, class Order = AnyOrder>
  __device__ void pv_waited(std::uint32_t v_tile, const Order& order = {}) {
    order.take();
    rescale_pending();  // also fences O and P for the product
    issue_pv<kWidth>(v_tile);
    order.pass();
    wait_pv();
  }
  // The softmax of the scores in s (`valid` real keys), then P into
  // p_prev; `then` runs in between: the wait for the P·V product in flight,
  // which still reads p_prev. O's rescale is left to rescale_pending.
  template <int kWidth = kKeys, class Then>
  __device__ void softmax_into_p(int valid, float scale_log2, Then then) {
    static_assert(kWidth == kKeys || !kSoftmaxUnderPv, "narrow tiles in the serial order only");
    auto& scores = this->scores<kWidth>();
    bool grew = false;
    if constexpr (kSoftmaxUnderPv) {
      // With this branch's zeros the exponentials land outside S's registers
      // and ptxas keeps `then` (the P·V wait) after them; without it they are
      // written in place and ptxas waits for P·V before the softmax (SASS,
      // sm_90a, CUDA 13.0), which loses the loop its overlap.
      if (valid > 0) {
        if (valid < kKeys) mask<kKeys>(scores, valid);
        grew = consumer.softmax_scores(s, scale_log2, pending_correction);
      } else {
#pragma unroll
        for (int i = 0; i < kKeys / 2; ++i) s_flat()[i] = 0.0f;  // no keys: P = 0
      }
    } else {
      // No zeroing branch (for a whole 128-key block a register clear per
      // score every block cost 5 %); masked keys give P = 0. The P·V wait then
      // comes before the exponentials, so they do not run under that product
      // (docs/kernel-notes.md: up to ~10 % left there for 128-key blocks).
      if (valid < kWidth) mask<kWidth>(scores, valid);
      grew = consumer.softmax_scores(scores, scale_log2, pending_correction);
    }
    then();
    // O is rescaled right before the next P·V is issued (rescale_pending),
    // by the factors softmax_scores left in pending_correction.
    rescale_due = grew;
    pack_a<Elem>(scores, reinterpret_cast<std::uint32_t(&)[kWidth / 16][4]>(p_prev));
  }

 private:
  // The first tile row of the kWidth multiplied: a partial tile's real keys
  // are its last rows (kRealKeysLast) or its first.
  template <int kWidth>
  static constexpr int kFirstRow = kRealKeysLast ? kKeys - kWidth : 0;

  // Masks the scores of the kWidth keys' rows multiplied that hold no real key.
  template <int kWidth>
  __device__ void mask(typename Consumer::template ScoresOf<kWidth / 8>& scores, int valid) {
    if constexpr (kRealKeysLast)
      consumer.mask_keys_before(scores, kWidth - valid);
    else
      consumer.mask_keys(scores, valid);
  }

  // The rescale of O the last softmax asked for, before the P·V product that
  // adds to O is issued; its registers are fenced again for that product.
  __device__ void rescale_pending() {
    if (rescale_due) {
      consumer.rescale_o(pending_correction);
      rescale_due = false;
    }
    fence_registers(o());
    wgmma_fence();
  }

  bool rescale_due = false;
  float pending_correction[Consumer::kRowSlots];

  // S = Q·Kᵀ into s (a new group) over the kWidth keys' rows from
  // kFirstRow (128 bytes a row in each 64-column block); the caller fenced
  // the registers first.
  template <int kWidth>
  __device__ void issue_scores(std::uint32_t q_tile, std::uint32_t k_tile) {
    const std::uint32_t k_rows = k_tile + kFirstRow<kWidth> * 128;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk)
      wgmma_ss<kBf16, kWidth>(s_flat<kWidth>(), k_major_desc<kHeadDim>(q_tile, kk),
                              k_major_desc<kHeadDim, kKeys>(k_rows, kk), kk > 0);
    wgmma_commit();
    fence_registers(s_flat<kWidth>());
  }
  // O += P·V with P in p_prev (a new group), over the kWidth keys' rows of V.
  template <int kWidth>
  __device__ void issue_pv(std::uint32_t v_tile) {
#pragma unroll
    for (int kk = 0; kk < kWidth / 16; ++kk)
      wgmma_rs<kBf16, kHeadDim>(o(), p_prev[kk], mn_major_desc<kHeadDim, kKeys>(v_tile, kk + kFirstRow<kWidth> / 16),
                                1);
    wgmma_commit();
    fence_registers(o());
  }
};

}  // namespace vsa::cuda::sm90
