// The coarse stage's backward on the GPU (vsa/layer.hpp): dense attention's
// backward over the block means of one (batch, KV head) at a time, whose R
// query rows are the rows of its group's query heads (consecutive in
// [B, H, NQ, D]) and whose keys are its NK blocks:
//
//   rounding     q, dout, k and v means rounded to TF32 once, into the
//                workspace (every product below reads them as they are).
//   rows kernel  two warps per 16 query rows, each taking half of every
//                32-key stage of K and V (shared memory, one load per CTA of
//                four row tiles), walking the keys twice: first for each
//                row's maximum and softmax sum of the scores (merged across
//                the two warps), then for the scores again, P,
//                dP = dO·Vᵀ, dS = P ∘ (dP − δ) with δ = rowsum(dO ∘ O)
//                (float32, from the unrounded means), and dQ = scale · dS·K
//                in registers, the two warps' sums added at the end; P and dS
//                go to the workspace, rounded to TF32.
//   keys kernel  a warp per 16 keys and one of dV = Pᵀ·dO or
//                dK = scale · dSᵀ·Q over all R rows: the group's sum in one
//                warp's registers, without atomics (bitwise repeatable); the
//                four warps of a CTA share the dout or q rows through shared
//                memory.
//
// Every product is one mma.sync on TF32 operands rounded to nearest with
// float32 accumulation (about 2^-11 relative per operand: finer than the
// bf16 operands of the fine stage's backward). 3xTF32, as the forward's P·V,
// took 362 µs on Wan 480p against 252 for this version (docs/kernel-notes.md):
// three times the products and ~4 instructions per product for the splits,
// in kernels that are latency-bound (a warp or two per scheduler). The
// fragments are read 16 bytes at a time: along D in the score products (lane
// t takes 4 consecutive columns for two k-steps, the query rows the same way)
// and along the output columns in dQ, dK and dV (lane g takes 4 consecutive
// columns for four n-tiles, so a lane's accumulators hold columns
// 32c + 8t + (0..7)).
//
// The workspace holds P and dS as [B · Hkv][rows_padded][keys_padded] float32
// with zeros in the padding, which the rows kernel writes whole, so the keys
// kernel reads whole 8-row steps and 16-key tiles without masks; then the
// rounded means.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "cuda/common/block_lists.cuh"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_guard.hpp"
#include "cuda/common/ptx.cuh"
#include "cuda/common/smem_opt_in.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/layer/launch_checks.hpp"
#include "cuda/layer/tf32x3.cuh"
#include "cuda/tensor_views.hpp"
#include "vsa/error.hpp"

namespace vsa::cuda {
namespace {

constexpr int kWarpRows = 16;                 // an m16 tile: query rows per warp, keys per warp
constexpr int kKeysPadding = 64;              // the workspace's rows of P and dS are padded to 64 keys
constexpr int kStageKeys = 32;                // keys per shared-memory stage of the rows kernel
constexpr int kHalfKeys = kStageKeys / 2;     // a stage's keys per warp of a row tile
constexpr int kHalfTiles = kHalfKeys / 8;     // their n8 tiles
constexpr int kRowTiles = 4;                  // 16-row tiles per CTA of the rows kernel, two warps each
constexpr int kRowWarps = 2 * kRowTiles;
constexpr int kKeyWarps = 4;                  // 16-key tiles per CTA of the keys kernel (a warp each), one product
constexpr int kStageRows = 32;                // q or dout rows per shared-memory stage of the keys kernel
constexpr unsigned kAll = 0xffffffffu;
static_assert(kKeysPadding % kStageKeys == 0, "the rows kernel's stages tile the padded keys");
static_assert(kKeysPadding == kKeyWarps * kWarpRows, "a keys-kernel CTA covers 64 keys");

struct MeanGradParams {
  const float* out;   // coarse_out [B · Hkv, rows, D]: the means viewed by KV head
  const float* dout;  // dcoarse, as out
  const float* q_r;   // q_mean rounded to TF32, as out (workspace)
  const float* dout_r;
  const float* k_r;   // k_mean rounded, [B · Hkv, keys, D] (workspace)
  const float* v_r;
  const void* vbs;
  bool vbs_is_64;
  float* dq;
  float* dk;
  float* dv;
  float* probs;    // workspace: P  [B · Hkv, rows_padded, keys_padded]
  float* dscores;  // workspace: dS, as P
  int rows, rows_padded, keys, keys_padded;
  float scale, scale_log2;
};

int round_up(std::int64_t x, int unit) { return static_cast<int>((x + unit - 1) / unit * unit); }

__device__ __forceinline__ std::uint32_t bits(float x) { return __float_as_uint(x); }

__device__ __forceinline__ void mma(float (&d)[4], float a0, float a1, float a2, float a3, float b0, float b1) {
  tf32x3::mma(d, bits(a0), bits(a1), bits(a2), bits(a3), bits(b0), bits(b1));
}

// The four source tensors rounded to TF32 into their workspace copies, 16 bytes per thread.
struct RoundingParams {
  const float4* src[4];
  float4* dst[4];
  std::int64_t vecs[4];
};

// One part (q, dout, k, v) per blockIdx.y, grid-strided. The part's pointers are picked by
// comparisons, not by indexing the arrays, which put them in local memory (a stack frame).
__global__ void __launch_bounds__(layer::kThreads) round_means_kernel(const RoundingParams p) {
  const int part = static_cast<int>(blockIdx.y);
  const float4* src = part == 0 ? p.src[0] : part == 1 ? p.src[1] : part == 2 ? p.src[2] : p.src[3];
  float4* dst = part == 0 ? p.dst[0] : part == 1 ? p.dst[1] : part == 2 ? p.dst[2] : p.dst[3];
  const std::int64_t vecs = part == 0 ? p.vecs[0] : part == 1 ? p.vecs[1] : part == 2 ? p.vecs[2] : p.vecs[3];
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < vecs;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float4 x = __ldg(src + i);
    dst[i] = make_float4(__uint_as_float(tf32x3::round_to_tf32(x.x)), __uint_as_float(tf32x3::round_to_tf32(x.y)),
                         __uint_as_float(tf32x3::round_to_tf32(x.z)), __uint_as_float(tf32x3::round_to_tf32(x.w)));
  }
}

// Shared memory of a rows-kernel CTA: its four tiles' 16 rows of q and dout (pitch D + 16: a
// quarter-warp's 16-byte reads of two rows fall 16 banks apart; after pass 2 a tile's q rows
// carry the dQ partial sum from one warp to the other), two stages of 32 keys' rows of K and
// V (the same pitch), each warp's 16 × 16 tile of dS (pitch 20) and each warp's row softmax
// states (16 rows × top, total).
template <int kHeadDim>
struct RowsSmem {
  static constexpr int kPitch = kHeadDim + 16;
  static constexpr int kDsPitch = kHalfKeys + 4;
  static constexpr int kTileFloats = kWarpRows * kPitch;
  static constexpr int kQ = 0;                                  // [tile][16][kPitch]
  static constexpr int kDout = kQ + kRowTiles * kTileFloats;    // [tile][16][kPitch]
  static constexpr int kStages = kDout + kRowTiles * kTileFloats;
  static constexpr int kStageFloats = 2 * kStageKeys * kPitch;  // K rows, then V rows
  static constexpr int kDs = kStages + 2 * kStageFloats;        // [warp][16][kDsPitch]
  static constexpr int kStats = kDs + kRowWarps * kWarpRows * kDsPitch;  // [tile][half][16][2]
  static constexpr int kFloats = kStats + kRowWarps * kWarpRows * 2;
  static constexpr std::size_t kBytes = sizeof(float) * kFloats;
  static_assert(32 * (kHeadDim / 8) * 4 <= kTileFloats, "the dQ partial fits a tile's q rows");
};

__device__ __forceinline__ bool live_block(const MeanGradParams& p, int j) {
  return j < p.keys && load_meta(p.vbs, p.vbs_is_64, j) > 0;
}

// Keys j0 .. j0 + 31 of K (and of V when with_v) into a stage by cp.async, 16 bytes per thread
// and copy; keys past the last are zero-filled (their scores are masked, their dP is 0).
template <int kHeadDim>
__device__ __forceinline__ void stage_keys(float* stage, const float* k, const float* v, int j0, int keys,
                                           bool with_v) {
  constexpr int kVecs = kHeadDim / 4;
  constexpr int kPitch = RowsSmem<kHeadDim>::kPitch;
  const int copies = (with_v ? 2 : 1) * kStageKeys * kVecs;
  for (int i = static_cast<int>(threadIdx.x); i < copies; i += 32 * kRowWarps) {
    const int tensor = i / (kStageKeys * kVecs), r = (i / kVecs) % kStageKeys, c = 4 * (i % kVecs);
    const bool real = j0 + r < keys;
    const float* src = (tensor == 0 ? k : v) + static_cast<std::int64_t>(real ? j0 + r : 0) * kHeadDim + c;
    ptx::cp_async_16_or_zero(ptx::smem_addr(stage + (tensor * kStageKeys + r) * kPitch + c), src, real);
  }
  ptx::cp_async_commit();
}

// acc = x · yᵀ for the warp's 16 rows x and the 16 key rows y (both shared, rounded): the
// scores (x = q, y = K) or dP (x = dout, y = V) of the warp's half of a stage. Lane t reads
// columns d + 4t .. d + 4t + 3 of its rows and keys: the first two are k-slots t and t + 4 of
// one mma, the last two of the next.
template <int kHeadDim>
__device__ __forceinline__ void half_products(float (&acc)[kHalfTiles][4], const float* x, const float* y, int lane) {
  constexpr int kPitch = RowsSmem<kHeadDim>::kPitch;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int n = 0; n < kHalfTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  const float* x0 = x + g * kPitch + 4 * t;
  const float* x8 = x0 + 8 * kPitch;
  const float* y0 = y + g * kPitch + 4 * t;
#pragma unroll 4
  for (int d = 0; d < kHeadDim; d += 16) {
    const float4 a0 = *reinterpret_cast<const float4*>(x0 + d), a8 = *reinterpret_cast<const float4*>(x8 + d);
    float4 b[kHalfTiles];
#pragma unroll
    for (int n = 0; n < kHalfTiles; ++n) b[n] = *reinterpret_cast<const float4*>(y0 + 8 * n * kPitch + d);
#pragma unroll
    for (int n = 0; n < kHalfTiles; ++n) mma(acc[n], a0.x, a8.x, a0.y, a8.y, b[n].x, b[n].y);
#pragma unroll
    for (int n = 0; n < kHalfTiles; ++n) mma(acc[n], a0.z, a8.z, a0.w, a8.w, b[n].z, b[n].w);
  }
}

// acc[4c + i] += a · (rows y0 and y1 of a [·, D] tensor): one k-step of a product whose B
// is row-major along the output columns. Lane g reads columns 32c + 4g .. 32c + 4g + 3,
// column 32c + 4g + i feeding n-tile 4c + i (from global memory here, from shared memory in
// the keys kernel).
template <int kHeadDim, bool kShared = false>
__device__ __forceinline__ void column_step(float (&acc)[kHeadDim / 8][4], float a0, float a1, float a2, float a3,
                                            const float* y0, const float* y1) {
#pragma unroll
  for (int c = 0; c < kHeadDim / 32; ++c) {
    const auto* b0p = reinterpret_cast<const float4*>(y0 + 32 * c);
    const auto* b1p = reinterpret_cast<const float4*>(y1 + 32 * c);
    const float4 b0 = kShared ? *b0p : __ldg(b0p), b1 = kShared ? *b1p : __ldg(b1p);
    mma(acc[4 * c + 0], a0, a1, a2, a3, b0.x, b1.x);
    mma(acc[4 * c + 1], a0, a1, a2, a3, b0.y, b1.y);
    mma(acc[4 * c + 2], a0, a1, a2, a3, b0.z, b1.z);
    mma(acc[4 * c + 3], a0, a1, a2, a3, b0.w, b1.w);
  }
}

// Writes accumulator row h (0: fragment row g, 1: g + 8) of column_step's tiles, times
// factor, to `row` (a D-float output row): lane t's columns 32c + 8t .. 32c + 8t + 7.
template <int kHeadDim>
__device__ __forceinline__ void store_columns(float* row, const float (&acc)[kHeadDim / 8][4], int h, int t,
                                              float factor) {
#pragma unroll
  for (int c = 0; c < kHeadDim / 32; ++c) {
    float* at = row + 32 * c + 8 * t;
    *reinterpret_cast<float4*>(at) = make_float4(acc[4 * c][2 * h] * factor, acc[4 * c + 1][2 * h] * factor,
                                                 acc[4 * c + 2][2 * h] * factor, acc[4 * c + 3][2 * h] * factor);
    *reinterpret_cast<float4*>(at + 4) =
        make_float4(acc[4 * c][2 * h + 1] * factor, acc[4 * c + 1][2 * h + 1] * factor,
                    acc[4 * c + 2][2 * h + 1] * factor, acc[4 * c + 3][2 * h + 1] * factor);
  }
}

// dq += ds · K for the warp's 16 × 16 dS tile and its 16 key rows of K (both shared, rounded).
template <int kHeadDim>
__device__ __forceinline__ void accumulate_dq(float (&dq)[kHeadDim / 8][4], const float* ds, const float* k,
                                              int lane) {
  constexpr int kDsPitch = RowsSmem<kHeadDim>::kDsPitch;
  constexpr int kPitch = RowsSmem<kHeadDim>::kPitch;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int j = 0; j < kHalfKeys; j += 8) {
    const float* k0 = k + (j + t) * kPitch + 4 * g;
    column_step<kHeadDim, true>(dq, ds[g * kDsPitch + j + t], ds[(g + 8) * kDsPitch + j + t],
                                ds[g * kDsPitch + j + t + 4], ds[(g + 8) * kDsPitch + j + t + 4], k0,
                                k0 + 4 * kPitch);
  }
}

// A row's softmax state over the lane's keys, merged across a quad at the end.
struct RowSoftmax {
  float top = -INFINITY, total = 0.0f;

  // Adds scores already in log2 units (-inf for a dead key).
  template <int N>
  __device__ __forceinline__ void add(const float (&x)[N]) {
    float high = top;
#pragma unroll
    for (int i = 0; i < N; ++i) high = fmaxf(high, x[i]);
    if (high == -INFINITY) return;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < N; ++i) sum += ptx::exp2_fast(x[i] - high);
    total = total * ptx::exp2_fast(top - high) + sum;
    top = high;
  }

  // Both sides' order-free sum: the two warps of a pair get the same bits whichever merges.
  __device__ __forceinline__ void merge(float other_top, float other_total) {
    const float high = fmaxf(top, other_top);
    if (high != -INFINITY) total = total * ptx::exp2_fast(top - high) + other_total * ptx::exp2_fast(other_top - high);
    top = high;
  }

  __device__ __forceinline__ void merge_quad() {
#pragma unroll
    for (int offset = 1; offset < 4; offset *= 2)
      merge(__shfl_xor_sync(kAll, top, offset), __shfl_xor_sync(kAll, total, offset));
  }
};

// A CTA of eight warps takes four 16-row tiles, two warps per tile, each taking half of every
// 32-key stage of K (and V): the stages come through shared memory once per CTA, the next
// loading while this one is used. Pass 1 takes the scores for each row's maximum and softmax
// sum, merged across the tile's two warps through shared memory; pass 2 takes them again (from
// the staged K, cheaper than a round trip through global memory) and forms P, dP, dS and dQ;
// the second warp's dQ partial sum is added to the first's at the end.
template <int kHeadDim>
__global__ void __launch_bounds__(32 * kRowWarps) coarse_rows_kernel(const MeanGradParams p) {
  using S = RowsSmem<kHeadDim>;
  extern __shared__ float4 smem_vec[];
  float* smem = reinterpret_cast<float*>(smem_vec);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int tile = warp >> 1, half = warp & 1;
  const int row0 = (blockIdx.x * kRowTiles + tile) * kWarpRows;
  // A tile past the last row only loads stages and meets the CTA's barriers.
  const bool active = row0 < p.rows_padded;
  const std::int64_t head = blockIdx.y;
  const int real_rows = min(kWarpRows, p.rows - row0);
  const std::int64_t first = head * p.rows + row0;  // the tile's first row in q, out, dout and dq
  const float* k = p.k_r + head * p.keys * kHeadDim;
  const float* v = p.v_r + head * p.keys * kHeadDim;
  float* qs = smem + S::kQ + tile * S::kTileFloats;
  float* gs = smem + S::kDout + tile * S::kTileFloats;
  float* ds = smem + S::kDs + warp * kWarpRows * S::kDsPitch;
  float* stats = smem + S::kStats + tile * 2 * kWarpRows * 2;  // [half][row][top, total]
  const int stages = p.keys_padded / kStageKeys;
  const auto stage_of = [&](int s) { return smem + S::kStages + (s & 1) * S::kStageFloats; };

  stage_keys<kHeadDim>(stage_of(0), k, v, 0, p.keys, false);
  // The tile's rows, rounded (0 past the last row): q by warp 0, dout by warp 1.
  constexpr int kVecs = kHeadDim / 4;
  if (active) {
    const float* src = half == 0 ? p.q_r : p.dout_r;
    float* dst = half == 0 ? qs : gs;
    for (int i = lane; i < kWarpRows * kVecs; i += 32) {
      const int r = i / kVecs, c = 4 * (i % kVecs);
      *reinterpret_cast<float4*>(dst + r * S::kPitch + c) =
          r < real_rows ? __ldg(reinterpret_cast<const float4*>(src + (first + r) * kHeadDim + c))
                        : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  // δ = rowsum(dout ∘ out) of the float32 means: lanes 2r and 2r + 1 sum row r's halves.
  float delta[2] = {0.0f, 0.0f};
  if (active) {
    const int r = lane >> 1, column = (lane & 1) * (kHeadDim / 2);
    float sum = 0.0f;
    if (r < real_rows) {
      const float* o = p.out + (first + r) * kHeadDim + column;
      const float* dout = p.dout + (first + r) * kHeadDim + column;
#pragma unroll 8
      for (int c = 0; c < kHeadDim / 2; ++c) sum = fmaf(__ldg(dout + c), __ldg(o + c), sum);
    }
    sum += __shfl_xor_sync(kAll, sum, 1);
    delta[0] = __shfl_sync(kAll, sum, 2 * g);
    delta[1] = __shfl_sync(kAll, sum, 2 * (g + 8));
  }

  // The scores of the warp's half of a stage in log2 units, -inf for dead keys (and keys past
  // the last): x[h][2n + e] is row g + 8h, key j0 + 8n + 2t + e.
  const auto scores = [&](float (&x)[2][2 * kHalfTiles], const float* keys_k, int j0) {
    float acc[kHalfTiles][4];
    half_products<kHeadDim>(acc, qs, keys_k, lane);
#pragma unroll
    for (int n = 0; n < kHalfTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool live = live_block(p, j0 + 8 * n + 2 * t + e);
        x[0][2 * n + e] = live ? acc[n][e] * p.scale_log2 : -INFINITY;
        x[1][2 * n + e] = live ? acc[n][2 + e] * p.scale_log2 : -INFINITY;
      }
    }
  };

  // Pass 1: each row's maximum and softmax sum over the warp's half of each stage.
  RowSoftmax soft[2];
  for (int st = 0; st < stages; ++st) {
    ptx::cp_async_wait<0>();
    __syncthreads();  // stage st is whole (and the q rows, at st = 0); every warp is done with st − 1
    if (st + 1 < stages) stage_keys<kHeadDim>(stage_of(st + 1), k, v, (st + 1) * kStageKeys, p.keys, false);
    if (!active) continue;
    float x[2][2 * kHalfTiles];
    scores(x, stage_of(st) + half * kHalfKeys * S::kPitch, st * kStageKeys + half * kHalfKeys);
    soft[0].add(x[0]);
    soft[1].add(x[1]);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    soft[h].merge_quad();
    if (t == 0) {
      stats[(half * kWarpRows + g + 8 * h) * 2] = soft[h].top;
      stats[(half * kWarpRows + g + 8 * h) * 2 + 1] = soft[h].total;
    }
  }
  __syncthreads();  // the stats; every warp is done with the last stage of pass 1
  stage_keys<kHeadDim>(stage_of(0), k, v, 0, p.keys, true);
  float inv_total[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float* other = stats + ((1 - half) * kWarpRows + g + 8 * h) * 2;
    soft[h].merge(other[0], other[1]);
    inv_total[h] = soft[h].total > 0.0f ? 1.0f / soft[h].total : 0.0f;
  }

  // Pass 2: the scores again, P, dP, dS and dQ over the warp's half of each stage.
  const std::int64_t ws_rows = (head * p.rows_padded + row0) * p.keys_padded;
  const auto ws_at = [&](int r, int j) { return ws_rows + static_cast<std::int64_t>(r) * p.keys_padded + j; };
  const bool real[2] = {g < real_rows, g + 8 < real_rows};
  float dq[kHeadDim / 8][4] = {};
  for (int st = 0; st < stages; ++st) {
    ptx::cp_async_wait<0>();
    __syncthreads();  // stage st is whole; every warp is done with st − 1
    if (st + 1 < stages) stage_keys<kHeadDim>(stage_of(st + 1), k, v, (st + 1) * kStageKeys, p.keys, true);
    if (!active) continue;
    const int j0 = st * kStageKeys + half * kHalfKeys;
    const float* keys_k = stage_of(st) + half * kHalfKeys * S::kPitch;
    float x[2][2 * kHalfTiles], dp[kHalfTiles][4];
    scores(x, keys_k, j0);
    half_products<kHeadDim>(dp, gs, keys_k + kStageKeys * S::kPitch, lane);
#pragma unroll
    for (int n = 0; n < kHalfTiles; ++n) {
      const int j = j0 + 8 * n + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = g + 8 * h;
        float prob[2], dscore[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          // Dead keys (and keys past the last) score -inf; padding rows are not real.
          const float xs = x[h][2 * n + e];
          const bool weighted = real[h] && xs != -INFINITY;
          const float exact = weighted ? ptx::exp2_fast(xs - soft[h].top) * inv_total[h] : 0.0f;
          dscore[e] = weighted ? __uint_as_float(tf32x3::round_to_tf32(exact * (dp[n][2 * h + e] - delta[h]))) : 0.0f;
          prob[e] = __uint_as_float(tf32x3::round_to_tf32(exact));
        }
        *reinterpret_cast<float2*>(p.probs + ws_at(r, j)) = make_float2(prob[0], prob[1]);
        *reinterpret_cast<float2*>(p.dscores + ws_at(r, j)) = make_float2(dscore[0], dscore[1]);
        *reinterpret_cast<float2*>(ds + r * S::kDsPitch + 8 * n + 2 * t) = make_float2(dscore[0], dscore[1]);
      }
    }
    __syncwarp();
    accumulate_dq<kHeadDim>(dq, ds, keys_k, lane);
    __syncwarp();  // the next stage rewrites ds
  }

  // Warp 1's dQ partial through the tile's q rows (done with), [accumulator][lane]: no bank conflicts.
  __syncthreads();
  float* partial = qs;
  if (half == 1 && active) {
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[(4 * n + i) * 32 + lane] = dq[n][i];
  }
  __syncthreads();
  if (half == 1 || !active) return;
#pragma unroll
  for (int n = 0; n < kHeadDim / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) dq[n][i] += partial[(4 * n + i) * 32 + lane];
#pragma unroll
  for (int h = 0; h < 2; ++h)
    if (real[h]) store_columns<kHeadDim>(p.dq + (first + g + 8 * h) * kHeadDim, dq, h, t, p.scale);
}

// Shared memory of the keys kernel: two stages of kStageRows q or dout rows at pitch D + 8
// (a quarter-warp's 16-byte fragment reads of four rows fall 8 banks apart).
template <int kHeadDim>
struct KeysSmem {
  static constexpr int kPitch = kHeadDim + 8;
  static constexpr int kStageFloats = kStageRows * kPitch;
  static constexpr std::size_t kBytes = sizeof(float) * 2 * kStageFloats;
};

// Rows r0 .. r0 + kStageRows − 1 of y ([rows, D], rounded) into a stage by cp.async, 16 bytes
// per thread and copy; rows past the last are zero-filled (their P and dS are 0 too).
template <int kHeadDim>
__device__ __forceinline__ void stage_rows(float* stage, const float* y, int r0, int rows) {
  constexpr int kVecs = kHeadDim / 4;
  for (int i = static_cast<int>(threadIdx.x); i < kStageRows * kVecs; i += 32 * kKeyWarps) {
    const int r = i / kVecs, c = 4 * (i % kVecs);
    const bool real = r0 + r < rows;
    ptx::cp_async_16_or_zero(ptx::smem_addr(stage + r * KeysSmem<kHeadDim>::kPitch + c),
                             y + static_cast<std::int64_t>(real ? r0 + r : 0) * kHeadDim + c, real);
  }
  ptx::cp_async_commit();
}

// A CTA of four warps takes 64 consecutive keys and one of dV = Pᵀ·dO or dK = scale · dSᵀ·Q
// (blockIdx.y odd: dK) over all R rows, each warp 16 keys: the group's sum in one warp's
// registers, without atomics (bitwise repeatable). The q or dout rows, which every warp
// reads whole, come through shared memory once per CTA, a stage of 32 rows loading while
// the one before is used.
template <int kHeadDim>
__global__ void __launch_bounds__(32 * kKeyWarps) coarse_keys_kernel(const MeanGradParams p) {
  using S = KeysSmem<kHeadDim>;
  extern __shared__ float4 smem_vec[];
  float* stages = reinterpret_cast<float*>(smem_vec);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int j0 = (blockIdx.x * kKeyWarps + warp) * kWarpRows;  // a warp past the last key stores nothing
  const bool is_dk = (blockIdx.y & 1) != 0;                     // CTA-uniform
  const std::int64_t head = blockIdx.y >> 1;
  // Fragment row g holds key j0 + 2g, row g + 8 key j0 + 2g + 1: one 8-byte read each row step.
  // j0 < keys_padded (the grid covers the keys in 64s): past the last key, P and dS are 0.
  const float* x = (is_dk ? p.dscores : p.probs) + head * p.rows_padded * p.keys_padded + j0 + 2 * g;
  const float* y = (is_dk ? p.q_r : p.dout_r) + head * p.rows * kHeadDim;

  float acc[kHeadDim / 8][4] = {};
  const int blocks = (p.rows_padded + kStageRows - 1) / kStageRows;
  stage_rows<kHeadDim>(stages, y, 0, p.rows);
  for (int b = 0; b < blocks; ++b) {
    float* stage = stages + (b & 1) * S::kStageFloats;
    if (b + 1 < blocks) stage_rows<kHeadDim>(stages + ((b + 1) & 1) * S::kStageFloats, y, (b + 1) * kStageRows, p.rows);
    if (b + 1 < blocks) ptx::cp_async_wait<1>(); else ptx::cp_async_wait<0>();
    __syncthreads();  // the stage is whole
    // Rows past rows_padded are not in the workspace; those below it and past R hold P = dS = 0.
    const int steps = min(kStageRows, p.rows_padded - b * kStageRows) / 8;
    for (int s = 0; s < steps; ++s) {
      const int r0 = b * kStageRows + 8 * s;
      const float2 x0 = *reinterpret_cast<const float2*>(x + static_cast<std::int64_t>(r0 + t) * p.keys_padded);
      const float2 x1 = *reinterpret_cast<const float2*>(x + static_cast<std::int64_t>(r0 + t + 4) * p.keys_padded);
      const float* y0 = stage + (8 * s + t) * S::kPitch + 4 * g;
      column_step<kHeadDim, true>(acc, x0.x, x0.y, x1.x, x1.y, y0, y0 + 4 * S::kPitch);
    }
    __syncthreads();  // every warp is done with the stage before it is loaded again
  }

  const float factor = is_dk ? p.scale : 1.0f;
  float* dst = (is_dk ? p.dk : p.dv) + head * p.keys * kHeadDim;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = j0 + 2 * g + h;
    if (key < p.keys) store_columns<kHeadDim>(dst + static_cast<std::int64_t>(key) * kHeadDim, acc, h, t, factor);
  }
}

// The workspace: P and dS, then the rounded q, dout, k and v means (floats).
struct WorkspaceLayout {
  int rows_padded, keys_padded;
  std::int64_t scores;  // floats of P (and of dS)
  std::int64_t rows;    // floats of q_mean (and of dcoarse)
  std::int64_t keys;    // floats of k_mean (and of v_mean)
  std::size_t bytes() const { return sizeof(float) * static_cast<std::size_t>(2 * (scores + rows + keys)); }
};

WorkspaceLayout workspace_layout(const detail::CoarseShape& c) {
  WorkspaceLayout w{};
  w.rows_padded = round_up(c.heads / c.kv_heads * c.nq, kWarpRows);
  w.keys_padded = round_up(c.nk, kKeysPadding);
  w.scores = c.batch * c.kv_heads * static_cast<std::int64_t>(w.rows_padded) * w.keys_padded;
  w.rows = c.batch * c.heads * c.nq * c.dim;
  w.keys = c.batch * c.kv_heads * c.nk * c.dim;
  return w;
}

template <int kHeadDim>
void launch(const MeanGradParams& p, const RoundingParams& rounding, unsigned heads, cudaStream_t stream) {
  // The larger of the parts in at most 4 × 132 CTAs per part (grid-strided past that).
  const std::int64_t vecs = std::max(rounding.vecs[0], rounding.vecs[2]);
  round_means_kernel<<<dim3(std::min(layer::ctas_for(vecs), 528u), 4), layer::kThreads, 0, stream>>>(rounding);
  check_launch("round_means_kernel");
  constexpr std::size_t kRowsSmem = RowsSmem<kHeadDim>::kBytes;
  allow_dynamic_smem<coarse_rows_kernel<kHeadDim>>(static_cast<int>(kRowsSmem),
                                                   "cudaFuncSetAttribute(coarse_rows_kernel)");
  const dim3 row_grid((p.rows_padded / kWarpRows + kRowTiles - 1) / kRowTiles, heads);
  coarse_rows_kernel<kHeadDim><<<row_grid, 32 * kRowWarps, kRowsSmem, stream>>>(p);
  check_launch("coarse_rows_kernel");
  const dim3 key_grid((p.keys + kWarpRows * kKeyWarps - 1) / (kWarpRows * kKeyWarps), 2 * heads);
  coarse_keys_kernel<kHeadDim><<<key_grid, 32 * kKeyWarps, KeysSmem<kHeadDim>::kBytes, stream>>>(p);
  check_launch("coarse_keys_kernel");
}

}  // namespace

std::size_t coarse_stage_backward_workspace_bytes(const detail::CoarseShape& c) { return workspace_layout(c).bytes(); }

void coarse_stage_backward(const CoarseStageBackwardParams& params, const detail::CoarseShape& c) {
  // Every tensor is read or written in 16-byte pieces.
  const std::pair<const TensorRef*, const char*> blocks[] = {
      {&params.q_mean, "q_mean"},   {&params.k_mean, "k_mean"},   {&params.v_mean, "v_mean"},
      {&params.coarse_out, "coarse_out"}, {&params.dcoarse, "dcoarse"}, {&params.dq_mean, "dq_mean"},
      {&params.dk_mean, "dk_mean"}, {&params.dv_mean, "dv_mean"}};
  for (const auto& [tensor, name] : blocks) layer::require_aligned_blocks(*tensor, name);
  const WorkspaceLayout w = workspace_layout(c);
  if (static_cast<std::int64_t>(w.rows_padded) * w.keys_padded > INT32_MAX || c.batch * c.kv_heads > 32767)
    throw Error(ErrorKind::unsupported, "q_mean.shape",
                "at most 2^31 query rows × KV blocks per KV head and 32767 (batch, KV head) pairs on CUDA",
                params.q_mean.shape_string());
  if (params.workspace == nullptr || params.workspace_bytes < w.bytes())
    throw Error(ErrorKind::invalid_argument, "workspace",
                std::to_string(w.bytes()) + " bytes of device memory (coarse_stage_backward_workspace_bytes)",
                params.workspace == nullptr ? std::string("none") : std::to_string(params.workspace_bytes) + " bytes");
  if (reinterpret_cast<std::uintptr_t>(params.workspace) % 256 != 0)
    throw Error(ErrorKind::invalid_argument, "workspace", "a 256-byte aligned pointer", "an unaligned pointer");

  auto* base = static_cast<float*>(params.workspace);
  float* const rounded[4] = {base + 2 * w.scores, base + 2 * w.scores + w.rows, base + 2 * w.scores + 2 * w.rows,
                             base + 2 * w.scores + 2 * w.rows + w.keys};
  const TensorRef* const sources[4] = {&params.q_mean, &params.dcoarse, &params.k_mean, &params.v_mean};
  RoundingParams rounding{};
  for (int part = 0; part < 4; ++part) {
    rounding.src[part] = static_cast<const float4*>(sources[part]->data);
    rounding.dst[part] = reinterpret_cast<float4*>(rounded[part]);
    rounding.vecs[part] = (part < 2 ? w.rows : w.keys) / 4;
  }
  MeanGradParams p{};
  p.out = static_cast<const float*>(params.coarse_out.data);
  p.dout = static_cast<const float*>(params.dcoarse.data);
  p.q_r = rounded[0];
  p.dout_r = rounded[1];
  p.k_r = rounded[2];
  p.v_r = rounded[3];
  p.vbs = params.variable_block_sizes.data;
  p.vbs_is_64 = params.variable_block_sizes.dtype == DType::i64;
  p.dq = static_cast<float*>(params.dq_mean.data);
  p.dk = static_cast<float*>(params.dk_mean.data);
  p.dv = static_cast<float*>(params.dv_mean.data);
  p.rows = static_cast<int>(c.heads / c.kv_heads * c.nq);
  p.rows_padded = w.rows_padded;
  p.keys = static_cast<int>(c.nk);
  p.keys_padded = w.keys_padded;
  p.probs = base;
  p.dscores = base + w.scores;
  p.scale = c.scale;
  p.scale_log2 = c.scale * kLog2e;
  const auto heads = static_cast<unsigned>(c.batch * c.kv_heads);
  const DeviceGuard device(params.q_mean.device_index);
  const auto stream = static_cast<cudaStream_t>(params.stream);
  if (c.dim == 64)
    launch<64>(p, rounding, heads, stream);
  else
    launch<128>(p, rounding, heads, stream);
}

}  // namespace vsa::cuda
