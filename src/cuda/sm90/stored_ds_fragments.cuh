// The Hopper stored-dS path's tile format: a pair's dSᵀ as the key pass holds
// it in registers, the A operand of its dK += dSᵀ·Q product, stored so that
// the dQ pass gets the A operand of its dQ += dS·K product from one 16-byte
// load per thread and 16-key step, and a transpose of each 8 × 8 block in
// registers (movmatrix). So neither pass moves dS through a shared-memory
// tile of its own: the key pass stores from its registers (four 16-byte
// stores a thread), where it used to write the tile into shared memory and
// copy it out in bulk, 16 KB of shared-memory traffic a pair while its Sᵀ
// and dPᵀ products read both their operands from there.
//
// Chunk (w, s, lane), 16 bytes at ds_chunk(w, s, lane), belongs to the dQ
// pass's warp w (query rows 16w..16w+15) at its 16-key step s (keys
// 16s..16s+15): it holds the registers dsa[w][0..3] of the key pass's warp s
// (its 16 keys) at the same lane. Those are four 8 × 8 blocks of dSᵀ (keys ×
// queries) in the m16n8 layout; transposed, blocks 0, 2, 1, 3 are the dQ
// pass's A registers 0..3 for that step (pack_a: register 1 holds keys + 8,
// register 2 queries + 8). A key pass warp's stores of one w are 512
// contiguous bytes, and so are a dQ pass warp's loads of one s.
#pragma once

#include <cstdint>

#include "cuda/common/block_lists.cuh"
#include "cuda/common/ptx.cuh"

namespace vsa::cuda::sm90 {

constexpr int kDsSteps = kTileRows / 16;  // 16-key steps of a tile, and 16-row warps of a warpgroup

__device__ __forceinline__ std::uint32_t ds_chunk(int dq_warp, int step, int lane) {
  return static_cast<std::uint32_t>(((dq_warp * kDsSteps + step) * 32 + lane) * 16);
}

// The key pass: warp `warp`'s dSᵀ fragments (its 16 keys, the A operand of dK += dSᵀ·Q) into
// the tile at `tile`. The tiles (GBs) stream through L2, each byte written once and read once,
// so their lines are stored evict-first: the Q and dO tiles every pair re-reads from L2 stay.
__device__ __forceinline__ void store_ds_fragments(unsigned char* tile, const std::uint32_t (&dsa)[kDsSteps][4],
                                                   int warp, int lane) {
#pragma unroll
  for (int w = 0; w < kDsSteps; ++w) ptx::st_global_streaming_b32x4(tile + ds_chunk(w, warp, lane), dsa[w]);
}

// The dQ pass: the calling thread's own chunks of the tile at `src` into the same places of
// the shared copy at `dst` (cp.async, committed by the caller). Steps past the tile's `valid`
// real keys were not stored (their keys are padding, dS 0 there) and are zero-filled.
__device__ __forceinline__ void copy_ds_fragments(std::uint32_t dst, const unsigned char* src, int valid, int warp,
                                                  int lane) {
#pragma unroll
  for (int s = 0; s < kDsSteps; ++s) {
    const std::uint32_t chunk = ds_chunk(warp, s, lane);
    ptx::cp_async_16_or_zero(dst + chunk, src + chunk, 16 * s < valid);
  }
}

// The dQ pass: the A operand of dQ += dS·K for the first kSteps 16-key steps, from the
// calling thread's chunks in the shared copy at `src`.
template <int kSteps>
__device__ __forceinline__ void load_dq_operand(std::uint32_t src, std::uint32_t (&a)[kDsSteps][4], int warp,
                                                int lane) {
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    std::uint32_t ds_t[4];
    ptx::ld_shared_b32x4(ds_t, src + ds_chunk(warp, s, lane));
    a[s][0] = ptx::movmatrix_trans(ds_t[0]);
    a[s][1] = ptx::movmatrix_trans(ds_t[2]);
    a[s][2] = ptx::movmatrix_trans(ds_t[1]);
    a[s][3] = ptx::movmatrix_trans(ds_t[3]);
  }
}

}  // namespace vsa::cuda::sm90
