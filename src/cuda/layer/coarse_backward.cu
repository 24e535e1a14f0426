// The coarse stage's backward on the GPU (vsa/layer.hpp): dense attention's
// backward over the block means of one (batch, KV head) at a time, whose R
// query rows are the rows of its group's query heads (consecutive in
// [B, H, NQ, D]) and whose keys are its NK blocks:
//
//   rows kernel  a warp per 16 query rows walks the keys in chunks of 64,
//                twice: first for each row's score maximum and softmax sum,
//                then for P, dP = dO·Vᵀ, dS = P ∘ (dP − δ) with
//                δ = rowsum(dO ∘ O), and dQ = scale · dS·K, kept in
//                registers; P and dS go to the workspace.
//   keys kernel  a warp per 16 keys and one of dV = Pᵀ·dO or
//                dK = scale · dSᵀ·Q over all R rows: the group's sum in one
//                warp's registers, without atomics (bitwise repeatable).
//
// Every product runs on mma.sync in 3xTF32 (tf32x3.cuh, about float32's
// accuracy; the torch version this replaces ran float32 GEMMs on the CUDA
// cores). The workspace holds P and dS as [B · Hkv][rows_padded][keys_padded]
// float32 with zeros in the padding, which the rows kernel writes whole, so
// the keys kernel reads whole 8-row steps and 16-key tiles without masks.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_guard.hpp"
#include "cuda/common/ptx.cuh"
#include "cuda/cuda_backend.hpp"
#include "cuda/layer/launch_checks.hpp"
#include "cuda/layer/tf32x3.cuh"
#include "cuda/tensor_views.hpp"
#include "vsa/error.hpp"

namespace vsa::cuda {
namespace {

constexpr int kTileRows = 16;                 // an m16 tile: query rows per warp, keys per warp
constexpr int kChunkKeys = 64;                // keys per step of the rows kernel
constexpr int kChunkTiles = kChunkKeys / 8;   // its n8 tiles
constexpr int kRowWarps = 4;                  // warps per CTA of the rows kernel
constexpr int kKeyTilesPerCta = 2;            // 16-key tiles per CTA of the keys kernel, two warps each
constexpr int kKeyWarps = 2 * kKeyTilesPerCta;

struct MeanGradParams {
  const float* q;     // [B · Hkv, rows, D]: the means viewed by KV head
  const float* out;   // coarse_out, as q
  const float* dout;  // dcoarse, as q
  const float* k;     // [B · Hkv, keys, D]
  const float* v;
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

// Shared memory of one rows-kernel warp: its 16 rows of q and dout (pitch D + 4,
// so a fragment's eight rows fall in different banks) and one chunk of dS.
template <int kHeadDim>
struct RowsSmem {
  static constexpr int kPitch = kHeadDim + 4;
  static constexpr int kDsPitch = kChunkKeys + 4;
  static constexpr int kWarpFloats = 2 * kTileRows * kPitch + kTileRows * kDsPitch;
  static constexpr std::size_t kBytes = sizeof(float) * kWarpFloats * kRowWarps;
};

__device__ __forceinline__ bool live_block(const MeanGradParams& p, int j) {
  if (j >= p.keys) return false;
  const long long size = p.vbs_is_64 ? static_cast<const long long*>(p.vbs)[j] : static_cast<const int*>(p.vbs)[j];
  return size > 0;
}

// The A fragment of rows g and g + 8, columns c and c + 4 of a row-major tile in shared memory.
__device__ __forceinline__ tf32x3::FragA fragment_a(const float* tile, int pitch, int g, int c) {
  return {{tf32x3::split(tile[g * pitch + c]), tf32x3::split(tile[(g + 8) * pitch + c]),
           tf32x3::split(tile[g * pitch + c + 4]), tf32x3::split(tile[(g + 8) * pitch + c + 4])}};
}

// acc = x · yᵀ for the warp's 16 rows x (shared) and keys j0 .. j0 + 63 of y
// (global, [keys, D]): the scores (x = q, y = k) or dP (x = dout, y = v) of
// one chunk. Keys past the last read the last one; the caller masks them.
template <int kHeadDim>
__device__ __forceinline__ void chunk_products(float (&acc)[kChunkTiles][4], const float* x, const float* y, int j0,
                                               int keys, int lane) {
  constexpr int kPitch = RowsSmem<kHeadDim>::kPitch;
  const int g = lane >> 2, t = lane & 3;
  const float* key_rows[kChunkTiles];
#pragma unroll
  for (int n = 0; n < kChunkTiles; ++n) {
    key_rows[n] = y + static_cast<std::int64_t>(min(j0 + 8 * n + g, keys - 1)) * kHeadDim + t;
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  }
#pragma unroll 4
  for (int d = 0; d < kHeadDim; d += 8) {
    const tf32x3::FragA a = fragment_a(x, kPitch, g, d + t);
    tf32x3::FragB b[kChunkTiles];
#pragma unroll
    for (int n = 0; n < kChunkTiles; ++n)
      b[n] = {{tf32x3::split(__ldg(key_rows[n] + d)), tf32x3::split(__ldg(key_rows[n] + d + 4))}};
    tf32x3::mma3_row(acc, a, b);
  }
}

// dq += ds · k[j0 .. j0 + 63] for the chunk's dS tile (shared, 16 × 64).
template <int kHeadDim>
__device__ __forceinline__ void accumulate_dq(float (&dq)[kHeadDim / 8][4], const float* ds, const float* k, int j0,
                                              int keys, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll 2
  for (int j = 0; j < kChunkKeys; j += 8) {
    const tf32x3::FragA a = fragment_a(ds, RowsSmem<kHeadDim>::kDsPitch, g, j + t);
    const float* k0 = k + static_cast<std::int64_t>(min(j0 + j + t, keys - 1)) * kHeadDim + g;
    const float* k1 = k + static_cast<std::int64_t>(min(j0 + j + t + 4, keys - 1)) * kHeadDim + g;
    tf32x3::FragB b[kHeadDim / 8];
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n)
      b[n] = {{tf32x3::split(__ldg(k0 + 8 * n)), tf32x3::split(__ldg(k1 + 8 * n))}};
    tf32x3::mma3_row(dq, a, b);
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

  __device__ __forceinline__ void merge_quad() {
#pragma unroll
    for (int offset = 1; offset < 4; offset *= 2) {
      const float other_top = __shfl_xor_sync(0xffffffffu, top, offset);
      const float other_total = __shfl_xor_sync(0xffffffffu, total, offset);
      const float high = fmaxf(top, other_top);
      if (high != -INFINITY)
        total = total * ptx::exp2_fast(top - high) + other_total * ptx::exp2_fast(other_top - high);
      top = high;
    }
  }
};

template <int kHeadDim>
__global__ void __launch_bounds__(32 * kRowWarps, 1) coarse_rows_kernel(const MeanGradParams p) {
  using S = RowsSmem<kHeadDim>;
  extern __shared__ float4 smem_vec[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int row0 = (blockIdx.x * kRowWarps + warp) * kTileRows;
  if (row0 >= p.rows_padded) return;
  const std::int64_t head = blockIdx.y;
  const int real_rows = min(kTileRows, p.rows - row0);
  const std::int64_t first = head * p.rows + row0;  // the warp's first row in q, out, dout and dq
  const float* k = p.k + head * p.keys * kHeadDim;
  const float* v = p.v + head * p.keys * kHeadDim;
  float* xs = reinterpret_cast<float*>(smem_vec) + warp * S::kWarpFloats;
  float* qs = xs;
  float* gs = xs + kTileRows * S::kPitch;
  float* ds = xs + 2 * kTileRows * S::kPitch;

  // The warp's rows of q and dout (0 past the last row).
  constexpr int kVecs = kHeadDim / 4;
  for (int i = lane; i < kTileRows * kVecs; i += 32) {
    const int r = i / kVecs, c = 4 * (i % kVecs);
    const bool real = r < real_rows;
    const std::int64_t at = (first + r) * kHeadDim + c;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    *reinterpret_cast<float4*>(qs + r * S::kPitch + c) = real ? __ldg(reinterpret_cast<const float4*>(p.q + at)) : zero;
    *reinterpret_cast<float4*>(gs + r * S::kPitch + c) = real ? __ldg(reinterpret_cast<const float4*>(p.dout + at)) : zero;
  }
  // δ = rowsum(dout ∘ out): lanes 2r and 2r + 1 sum row r's halves.
  float delta[2];
  {
    const int r = lane >> 1, half = (lane & 1) * (kHeadDim / 2);
    float sum = 0.0f;
    if (r < real_rows) {
      const float* o = p.out + (first + r) * kHeadDim + half;
      const float* dout = p.dout + (first + r) * kHeadDim + half;
#pragma unroll 8
      for (int c = 0; c < kHeadDim / 2; ++c) sum = fmaf(__ldg(dout + c), __ldg(o + c), sum);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    delta[0] = __shfl_sync(0xffffffffu, sum, 2 * g);
    delta[1] = __shfl_sync(0xffffffffu, sum, 2 * (g + 8));
  }
  __syncwarp();

  // Pass 1: each row's maximum and softmax sum over its live keys (rows g, g + 8).
  RowSoftmax soft[2];
  for (int j0 = 0; j0 < p.keys; j0 += kChunkKeys) {
    float s[kChunkTiles][4];
    chunk_products<kHeadDim>(s, qs, k, j0, p.keys, lane);
    float x[2][2 * kChunkTiles];
#pragma unroll
    for (int n = 0; n < kChunkTiles; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool live = live_block(p, j0 + 8 * n + 2 * t + e);
        x[0][2 * n + e] = live ? s[n][e] * p.scale_log2 : -INFINITY;
        x[1][2 * n + e] = live ? s[n][2 + e] * p.scale_log2 : -INFINITY;
      }
    soft[0].add(x[0]);
    soft[1].add(x[1]);
  }
  float inv_total[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    soft[h].merge_quad();
    inv_total[h] = soft[h].total > 0.0f ? 1.0f / soft[h].total : 0.0f;
  }

  // Pass 2: P, dS and dQ, chunk by chunk.
  const bool real[2] = {g < real_rows, g + 8 < real_rows};
  const std::int64_t ws_rows = (head * p.rows_padded + row0) * p.keys_padded;
  float dq[kHeadDim / 8][4] = {};
  for (int j0 = 0; j0 < p.keys; j0 += kChunkKeys) {
    float s[kChunkTiles][4], dp[kChunkTiles][4];
    chunk_products<kHeadDim>(s, qs, k, j0, p.keys, lane);
    chunk_products<kHeadDim>(dp, gs, v, j0, p.keys, lane);
#pragma unroll
    for (int n = 0; n < kChunkTiles; ++n) {
      const int j = j0 + 8 * n + 2 * t;
      const bool live[2] = {live_block(p, j), live_block(p, j + 1)};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float prob[2], dscore[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const bool weighted = live[e] && real[h];
          prob[e] = weighted ? ptx::exp2_fast(s[n][2 * h + e] * p.scale_log2 - soft[h].top) * inv_total[h] : 0.0f;
          dscore[e] = weighted ? prob[e] * (dp[n][2 * h + e] - delta[h]) : 0.0f;
        }
        const int r = g + 8 * h;
        const std::int64_t at = ws_rows + static_cast<std::int64_t>(r) * p.keys_padded + j;
        *reinterpret_cast<float2*>(p.probs + at) = make_float2(prob[0], prob[1]);
        *reinterpret_cast<float2*>(p.dscores + at) = make_float2(dscore[0], dscore[1]);
        *reinterpret_cast<float2*>(ds + r * S::kDsPitch + 8 * n + 2 * t) = make_float2(dscore[0], dscore[1]);
      }
    }
    __syncwarp();
    accumulate_dq<kHeadDim>(dq, ds, k, j0, p.keys, lane);
    __syncwarp();  // the next chunk rewrites ds
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (!real[h]) continue;
    float* row = p.dq + (first + g + 8 * h) * kHeadDim + 2 * t;
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n)
      *reinterpret_cast<float2*>(row + 8 * n) = make_float2(dq[n][2 * h] * p.scale, dq[n][2 * h + 1] * p.scale);
  }
}

template <int kHeadDim>
__global__ void __launch_bounds__(32 * kKeyWarps) coarse_keys_kernel(const MeanGradParams p) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int j0 = (blockIdx.x * kKeyTilesPerCta + warp / 2) * kTileRows;
  if (j0 >= p.keys) return;
  const bool is_dk = (warp & 1) != 0;  // warp-uniform: dK = scale · dSᵀ·Q, else dV = Pᵀ·dO
  const std::int64_t head = blockIdx.y;
  const float* x = (is_dk ? p.dscores : p.probs) + head * p.rows_padded * p.keys_padded + j0 + g;
  const float* y = (is_dk ? p.q : p.dout) + head * p.rows * kHeadDim + g;

  float acc[kHeadDim / 8][4] = {};
#pragma unroll 2
  for (int r0 = 0; r0 < p.rows_padded; r0 += 8) {
    const float* x0 = x + static_cast<std::int64_t>(r0 + t) * p.keys_padded;
    const float* x1 = x0 + 4 * static_cast<std::int64_t>(p.keys_padded);
    const tf32x3::FragA a = {
        {tf32x3::split(x0[0]), tf32x3::split(x0[8]), tf32x3::split(x1[0]), tf32x3::split(x1[8])}};
    // Rows past the last are padding (their P and dS are 0); y is read as 0 there.
    const bool real0 = r0 + t < p.rows, real1 = r0 + t + 4 < p.rows;
    const float* y0 = y + static_cast<std::int64_t>(min(r0 + t, p.rows - 1)) * kHeadDim;
    const float* y1 = y + static_cast<std::int64_t>(min(r0 + t + 4, p.rows - 1)) * kHeadDim;
    tf32x3::FragB b[kHeadDim / 8];
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n)
      b[n] = {{tf32x3::split(real0 ? __ldg(y0 + 8 * n) : 0.0f), tf32x3::split(real1 ? __ldg(y1 + 8 * n) : 0.0f)}};
    tf32x3::mma3_row(acc, a, b);
  }

  const float factor = is_dk ? p.scale : 1.0f;
  float* dst = (is_dk ? p.dk : p.dv) + head * p.keys * kHeadDim + 2 * t;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = j0 + g + 8 * h;
    if (key >= p.keys) continue;
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n)
      *reinterpret_cast<float2*>(dst + static_cast<std::int64_t>(key) * kHeadDim + 8 * n) =
          make_float2(acc[n][2 * h] * factor, acc[n][2 * h + 1] * factor);
  }
}

struct Padded {
  int rows, keys;
};

Padded padded_extents(const detail::CoarseShape& c) {
  return {round_up(c.heads / c.kv_heads * c.nq, kTileRows), round_up(c.nk, kChunkKeys)};
}

template <int kHeadDim>
void launch(const MeanGradParams& p, unsigned heads, cudaStream_t stream) {
  constexpr std::size_t kRowsSmem = RowsSmem<kHeadDim>::kBytes;
  check_cuda(cudaFuncSetAttribute(coarse_rows_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kRowsSmem)),
             "cudaFuncSetAttribute(coarse_rows_kernel)");
  const dim3 row_grid((p.rows_padded / kTileRows + kRowWarps - 1) / kRowWarps, heads);
  coarse_rows_kernel<kHeadDim><<<row_grid, 32 * kRowWarps, kRowsSmem, stream>>>(p);
  check_launch("coarse_rows_kernel");
  const dim3 key_grid((p.keys + kTileRows * kKeyTilesPerCta - 1) / (kTileRows * kKeyTilesPerCta), heads);
  coarse_keys_kernel<kHeadDim><<<key_grid, 32 * kKeyWarps, 0, stream>>>(p);
  check_launch("coarse_keys_kernel");
}

}  // namespace

std::size_t coarse_stage_backward_workspace_bytes(const detail::CoarseShape& c) {
  const Padded padded = padded_extents(c);
  return 2 * sizeof(float) * static_cast<std::size_t>(c.batch * c.kv_heads) * static_cast<std::size_t>(padded.rows) *
         static_cast<std::size_t>(padded.keys);
}

void coarse_stage_backward(const CoarseStageBackwardParams& params, const detail::CoarseShape& c) {
  // Rows are read in 16-byte pieces.
  layer::require_aligned_blocks(params.q_mean, "q_mean");
  layer::require_aligned_blocks(params.coarse_out, "coarse_out");
  layer::require_aligned_blocks(params.dcoarse, "dcoarse");
  const Padded padded = padded_extents(c);
  if (static_cast<std::int64_t>(padded.rows) * padded.keys > INT32_MAX || c.batch * c.kv_heads > 65535)
    throw Error(ErrorKind::unsupported, "q_mean.shape",
                "at most 2^31 query rows × KV blocks per KV head and 65535 (batch, KV head) pairs on CUDA",
                params.q_mean.shape_string());
  const std::size_t need = coarse_stage_backward_workspace_bytes(c);
  if (params.workspace == nullptr || params.workspace_bytes < need)
    throw Error(ErrorKind::invalid_argument, "workspace",
                std::to_string(need) + " bytes of device memory (coarse_stage_backward_workspace_bytes)",
                params.workspace == nullptr ? std::string("none") : std::to_string(params.workspace_bytes) + " bytes");
  if (reinterpret_cast<std::uintptr_t>(params.workspace) % 256 != 0)
    throw Error(ErrorKind::invalid_argument, "workspace", "a 256-byte aligned pointer", "an unaligned pointer");

  MeanGradParams p{};
  p.q = static_cast<const float*>(params.q_mean.data);
  p.out = static_cast<const float*>(params.coarse_out.data);
  p.dout = static_cast<const float*>(params.dcoarse.data);
  p.k = static_cast<const float*>(params.k_mean.data);
  p.v = static_cast<const float*>(params.v_mean.data);
  p.vbs = params.variable_block_sizes.data;
  p.vbs_is_64 = params.variable_block_sizes.dtype == DType::i64;
  p.dq = static_cast<float*>(params.dq_mean.data);
  p.dk = static_cast<float*>(params.dk_mean.data);
  p.dv = static_cast<float*>(params.dv_mean.data);
  p.rows = static_cast<int>(c.heads / c.kv_heads * c.nq);
  p.rows_padded = padded.rows;
  p.keys = static_cast<int>(c.nk);
  p.keys_padded = padded.keys;
  p.probs = static_cast<float*>(params.workspace);
  p.dscores = p.probs + c.batch * c.kv_heads * static_cast<std::int64_t>(padded.rows) * padded.keys;
  p.scale = c.scale;
  p.scale_log2 = c.scale * kLog2e;
  const auto heads = static_cast<unsigned>(c.batch * c.kv_heads);
  const DeviceGuard device(params.q_mean.device_index);
  const auto stream = static_cast<cudaStream_t>(params.stream);
  if (c.dim == 64)
    launch<64>(p, heads, stream);
  else
    launch<128>(p, heads, stream);
}

}  // namespace vsa::cuda
