// The coarse stage on the GPU: for kRows query blocks of one (batch, head),
// one CTA computes their scores against every KV block mean, keeps them in
// shared memory, selects each row's top-k blocks from them (the sorted q2k
// lists block_sparse_attn reads), turns them into softmax weights and
// multiplies by the value means. The [B, H, NQ, NK] score matrix never
// reaches global memory.
//
//   1. scores  S = Q·Kᵀ, a float32 FMA chain over d per score
//              (core/layer_arithmetic.hpp: bit-identical to the CPU backend),
//              K streamed in 128-key × 32-column tiles, two cp.async stages.
//   2. per row (one warp): the top-k of the live blocks by an 8-bit radix
//              select on the scores' order keys, ties to the lower id, written
//              in id order by ballots; then the softmax weights, in place.
//   3. coarse  O = P·V, V streamed in 32-key tiles (the first one loads
//              during step 2), scaled by 1 / the row's weight sum.
//
// Both products give each thread a 4-column (key or d) strip of kRows / 8
// rows: a warp covers 4 row groups × 8 column groups, so its shared-memory
// reads are 16-byte vectors that hit distinct banks (rows are padded by 4
// floats; the score row pitch is ≡ 8 mod 32 floats).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/layer_arithmetic.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_guard.hpp"
#include "cuda/common/ptx.cuh"
#include "cuda/cuda_backend.hpp"
#include "cuda/layer/launch_checks.hpp"
#include "cuda/tensor_views.hpp"

namespace vsa::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kScoreKeys = 128;    // keys per score tile
constexpr int kScoreCols = 32;     // d columns per score tile
constexpr int kValueKeys = 32;     // keys per value tile
constexpr int kStageFloats = kScoreKeys * (kScoreCols + 4);  // >= kValueKeys * (128 + 4)
constexpr int kBins = 256;         // radix select: 8 bits per pass

struct CoarseParams {
  const float* q_mean;  // [B, H, NQ, D]
  const float* k_mean;  // [B, Hkv, NK, D]
  const float* v_mean;
  const void* vbs;
  bool vbs_is_64;
  float* coarse;  // [B, H, NQ, D]
  void* q2k_idx;  // [B, H, NQ, topk]
  void* q2k_num;  // [B, H, NQ]
  bool lists_are_64;
  int heads, kv_group, nq, nk, topk;
  int score_pitch;  // floats per row of the shared score matrix
  float scale_log2;
};

__host__ __device__ constexpr int round_up(int x, int to) { return (x + to - 1) / to * to; }

// Floats per row of the shared score matrix: whole 32-key value tiles, and
// ≡ 8 (mod 32) so four consecutive rows fall on distinct banks.
__host__ __device__ constexpr int score_pitch(int nk) { return round_up(nk, 32) + 8; }

// Shared memory: [q rows | 2 stages | scores | histograms | row scales | live bits | live count |
// slack]. The slack (16 bytes, never written or used) is for nvcc's 16-byte reads of the live
// bits' tail, up to 12 bytes past the live count: compute-sanitizer memcheck reported them as
// out of bounds on the H200 (2026-11-30).
constexpr int kSlackWords = 4;

template <int kHeadDim, int kRows>
struct SmemLayout {
  static constexpr int kQPitch = kHeadDim + 4;
  static constexpr int kValuePitch = kHeadDim + 4;
  static_assert(kValueKeys * kValuePitch <= kStageFloats, "a value tile fits a stage");

  __host__ __device__ static std::size_t bytes(int nk) {
    const std::size_t floats = static_cast<std::size_t>(kRows) * kQPitch + 2 * kStageFloats +
                               static_cast<std::size_t>(kRows) * score_pitch(nk) + kWarps * kBins + kRows;
    return 4 * (floats + static_cast<std::size_t>(round_up(nk, 32) / 32) + 1 + kSlackWords);
  }
};

__device__ __forceinline__ void write_list_entry(void* p, bool is_64, std::int64_t i, int value) {
  if (is_64)
    static_cast<long long*>(p)[i] = value;
  else
    static_cast<int*>(p)[i] = value;
}

__device__ __forceinline__ bool is_live(const std::uint32_t* live_bits, int j) {
  return (live_bits[j >> 5] >> (j & 31)) & 1u;
}

// Rows [0, kRows) x kHeadDim of a [rows][D] float tensor starting at `src`
// into shared rows of `pitch` floats; rows at or past `valid_rows` are zero.
template <int kHeadDim, int kRows>
__device__ void load_query_rows(float* dst, const float* src, int valid_rows) {
  constexpr int kChunks = kHeadDim / 4;
  for (int c = static_cast<int>(threadIdx.x); c < kRows * kChunks; c += kThreads) {
    const int row = c / kChunks, col = 4 * (c % kChunks);
    float* to = dst + row * (kHeadDim + 4) + col;
    if (row < valid_rows)
      ptx::cp_async_16(ptx::smem_addr(to), src + static_cast<std::int64_t>(row) * kHeadDim + col);
    else
      *reinterpret_cast<float4*>(to) = make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// A tile of `keys` key rows from `first_key` (rows past nk repeat the last
// one: their results are never used), columns [col0, col0 + cols).
template <int kHeadDim, int kKeys, int kCols>
__device__ void load_key_tile(float* dst, const float* means, int first_key, int nk, int col0) {
  constexpr int kChunks = kCols / 4;
  for (int c = static_cast<int>(threadIdx.x); c < kKeys * kChunks; c += kThreads) {
    const int row = c / kChunks, col = 4 * (c % kChunks);
    const int key = min(first_key + row, nk - 1);
    ptx::cp_async_16(ptx::smem_addr(dst + row * (kCols + 4) + col),
                     means + static_cast<std::int64_t>(key) * kHeadDim + col0 + col);
  }
}

// One warp selects row `row`'s top `take` live blocks (ties to the lower id)
// and writes them ascending, then -1 up to topk.
__device__ void select_row(const float* scores, const std::uint32_t* live_bits, int n_live, int take,
                           std::uint32_t* hist, const CoarseParams& p, std::int64_t list_row) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  // The take-th largest key, and how many of the keys equal to it to take.
  std::uint32_t threshold = 0;
  int ties_wanted = take;
  if (take < n_live) {
    std::uint32_t prefix = 0, mask = 0;
    int remaining = take;
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int b = lane; b < kBins; b += 32) hist[b] = 0;
      __syncwarp();
      for (int j0 = 0; j0 < p.nk; j0 += 32) {
        const int j = j0 + lane;
        const std::uint32_t key = j < p.nk ? detail::score_key(scores[j]) : 0;
        const bool counted = j < p.nk && is_live(live_bits, j) && (key & mask) == prefix;
        const unsigned active = __ballot_sync(0xffffffffu, counted);
        if (counted) {
          // One shared-memory atomic per distinct bin in the warp: scores
          // of one row share their leading bits, so bins collide a lot.
          const unsigned bin = (key >> shift) & (kBins - 1);
          const unsigned peers = __match_any_sync(active, bin);
          if (lane == __ffs(peers) - 1) atomicAdd(&hist[bin], __popc(peers));
        }
      }
      __syncwarp();
      // Lane l holds bins 255 - 8l down to 248 - 8l, so lanes in order walk
      // the bins from the largest digit down.
      int counts[8], mine = 0;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        counts[e] = static_cast<int>(hist[kBins - 1 - 8 * lane - e]);
        mine += counts[e];
      }
      int through = mine;  // keys in this lane's bins and all larger ones
#pragma unroll
      for (int offset = 1; offset < 32; offset *= 2) {
        const int other = __shfl_up_sync(0xffffffffu, through, offset);
        if (lane >= offset) through += other;
      }
      int above = through - mine;  // keys in larger bins than this lane's
      const unsigned holder = __ballot_sync(0xffffffffu, above < remaining && remaining <= through);
      int digit = 0;
      if (lane == __ffs(holder) - 1) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          if (above + counts[e] >= remaining) {
            digit = kBins - 1 - 8 * lane - e;
            break;
          }
          above += counts[e];
        }
      }
      const int src = __ffs(holder) - 1;
      digit = __shfl_sync(0xffffffffu, digit, src);
      above = __shfl_sync(0xffffffffu, above, src);
      prefix |= static_cast<std::uint32_t>(digit) << shift;
      mask |= static_cast<std::uint32_t>(kBins - 1) << shift;
      remaining -= above;
      __syncwarp();
    }
    threshold = prefix;
    ties_wanted = remaining;
  }
  // Ascending ids: blocks above the threshold, and the first ties_wanted
  // blocks equal to it.
  const unsigned lower_lanes = (1u << lane) - 1u;
  int written = 0, ties_seen = 0;
  for (int j0 = 0; j0 < p.nk; j0 += 32) {
    const int j = j0 + lane;
    const bool live = j < p.nk && is_live(live_bits, j);
    const std::uint32_t key = live ? detail::score_key(scores[j]) : 0;
    const bool tie = live && key == threshold;
    const unsigned ties = __ballot_sync(0xffffffffu, tie);
    const bool chosen = (live && key > threshold) || (tie && ties_seen + __popc(ties & lower_lanes) < ties_wanted);
    const unsigned picked = __ballot_sync(0xffffffffu, chosen);
    if (chosen) write_list_entry(p.q2k_idx, p.lists_are_64, list_row * p.topk + written + __popc(picked & lower_lanes), j);
    written += __popc(picked);
    ties_seen += __popc(ties);
  }
  for (int e = written + lane; e < p.topk; e += 32) write_list_entry(p.q2k_idx, p.lists_are_64, list_row * p.topk + e, -1);
  if (lane == 0) write_list_entry(p.q2k_num, p.lists_are_64, list_row, written);
}

// One warp turns row `scores` into unnormalized softmax weights in place
// (0 for dead blocks and the padding up to a multiple of 32) and returns
// 1 / their sum (0 for a row with no live block).
__device__ float softmax_row(float* scores, const std::uint32_t* live_bits, const CoarseParams& p) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  float top = -INFINITY;
  for (int j = lane; j < p.nk; j += 32)
    if (is_live(live_bits, j)) top = fmaxf(top, scores[j]);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, offset));
  float total = 0.0f;
  const int padded = round_up(p.nk, 32);
  for (int j = lane; j < padded; j += 32) {
    const float weight = j < p.nk && is_live(live_bits, j) ? ptx::exp2_fast((scores[j] - top) * p.scale_log2) : 0.0f;
    scores[j] = weight;
    total += weight;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) total += __shfl_xor_sync(0xffffffffu, total, offset);
  return total > 0.0f ? 1.0f / total : 0.0f;
}

template <int kHeadDim, int kRows>
__global__ void __launch_bounds__(kThreads, 1) coarse_stage_kernel(const CoarseParams p) {
  using Smem = SmemLayout<kHeadDim, kRows>;
  constexpr int kRowsPerThread = kRows / 8;
  constexpr int kColsPerThread = kHeadDim / 32;  // of the P·V output
  constexpr int kColSteps = kHeadDim / kScoreCols;
  static_assert(kRows % 8 == 0 && kRows <= 32, "kRows: 8, 16 or 32");

  extern __shared__ float4 smem_vec[];
  float* const q_rows = reinterpret_cast<float*>(smem_vec);
  float* const stages = q_rows + kRows * Smem::kQPitch;
  float* const scores = stages + 2 * kStageFloats;
  std::uint32_t* const hists = reinterpret_cast<std::uint32_t*>(scores + kRows * p.score_pitch);
  float* const row_scale = reinterpret_cast<float*>(hists + kWarps * kBins);
  std::uint32_t* const live_bits = reinterpret_cast<std::uint32_t*>(row_scale + kRows);
  int* const live_count = reinterpret_cast<int*>(live_bits + round_up(p.nk, 32) / 32);

  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  // A warp is 4 row groups x 8 column groups; the CTA 2 x 4 warps.
  const int row_group = (warp / 4) * 4 + lane / 8;  // rows row_group + 8 i
  const int col_group = (warp % 4) * 8 + lane % 8;  // keys col_group + 32 m; d 4..: col_group * kColsPerThread
  const int head = static_cast<int>(blockIdx.y), batch = static_cast<int>(blockIdx.z);
  const int first_row = static_cast<int>(blockIdx.x) * kRows;
  const int valid_rows = min(kRows, p.nq - first_row);
  const std::int64_t bh = static_cast<std::int64_t>(batch) * p.heads + head;
  const std::int64_t kv_offset =
      (static_cast<std::int64_t>(batch) * (p.heads / p.kv_group) + head / p.kv_group) * p.nk * kHeadDim;
  const float* k_mean = p.k_mean + kv_offset;
  const float* v_mean = p.v_mean + kv_offset;

  // Live blocks (variable_block_sizes > 0) as bits, and their number.
  if (tid == 0) *live_count = 0;
  __syncthreads();
  for (int word = warp; word < round_up(p.nk, 32) / 32; word += kWarps) {
    const int j = 32 * word + lane;
    const long long size = j < p.nk ? (p.vbs_is_64 ? static_cast<const long long*>(p.vbs)[j]
                                                   : static_cast<const int*>(p.vbs)[j])
                                    : 0;
    const unsigned bits = __ballot_sync(0xffffffffu, size > 0);
    if (lane == 0) {
      live_bits[word] = bits;
      atomicAdd(live_count, __popc(bits));
    }
  }

  // ---- 1. scores -----------------------------------------------------------------------------
  load_query_rows<kHeadDim, kRows>(q_rows, p.q_mean + (bh * p.nq + first_row) * kHeadDim, valid_rows);
  const int score_steps = (p.nk + kScoreKeys - 1) / kScoreKeys * kColSteps;
  load_key_tile<kHeadDim, kScoreKeys, kScoreCols>(stages, k_mean, 0, p.nk, 0);
  ptx::cp_async_commit();
  float acc[kRowsPerThread][4];
  for (int step = 0; step < score_steps; ++step) {
    const int key_tile = step / kColSteps, col_step = step % kColSteps;
    if (step + 1 < score_steps) {
      load_key_tile<kHeadDim, kScoreKeys, kScoreCols>(stages + ((step + 1) & 1) * kStageFloats, k_mean,
                                                      (step + 1) / kColSteps * kScoreKeys, p.nk,
                                                      (step + 1) % kColSteps * kScoreCols);
      ptx::cp_async_commit();
      ptx::cp_async_wait<1>();
    } else {
      ptx::cp_async_wait<0>();
    }
    __syncthreads();
    if (col_step == 0) {
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
        for (int m = 0; m < 4; ++m) acc[i][m] = 0.0f;
    }
    const float* tile = stages + (step & 1) * kStageFloats;
#pragma unroll
    for (int d = 0; d < kScoreCols; d += 4) {
      float4 key[4], query[kRowsPerThread];
#pragma unroll
      for (int m = 0; m < 4; ++m)
        key[m] = *reinterpret_cast<const float4*>(tile + (col_group + 32 * m) * (kScoreCols + 4) + d);
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i)
        query[i] = *reinterpret_cast<const float4*>(q_rows + (row_group + 8 * i) * Smem::kQPitch +
                                                    col_step * kScoreCols + d);
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          acc[i][m] = detail::score_step(query[i].x, key[m].x, acc[i][m]);
          acc[i][m] = detail::score_step(query[i].y, key[m].y, acc[i][m]);
          acc[i][m] = detail::score_step(query[i].z, key[m].z, acc[i][m]);
          acc[i][m] = detail::score_step(query[i].w, key[m].w, acc[i][m]);
        }
    }
    if (col_step == kColSteps - 1) {
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int key = key_tile * kScoreKeys + col_group + 32 * m;
        if (key < p.nk)
#pragma unroll
          for (int i = 0; i < kRowsPerThread; ++i) scores[(row_group + 8 * i) * p.score_pitch + key] = acc[i][m];
      }
    }
    __syncthreads();  // the stage just read is the one the next iteration refills
  }

  // The first value tile loads while the rows are selected.
  load_key_tile<kHeadDim, kValueKeys, kHeadDim>(stages, v_mean, 0, p.nk, 0);
  ptx::cp_async_commit();

  // ---- 2. selection and softmax weights, one warp per row ------------------------------------
  const int n_live = *live_count;
  const int take = min(p.topk, n_live);
  for (int row = warp; row < valid_rows; row += kWarps) {
    float* row_scores = scores + row * p.score_pitch;
    select_row(row_scores, live_bits, n_live, take, hists + warp * kBins, p, bh * p.nq + first_row + row);
    __syncwarp();
    const float inv_total = softmax_row(row_scores, live_bits, p);
    if (lane == 0) row_scale[row] = inv_total;
  }

  // ---- 3. coarse output = P·V ----------------------------------------------------------------
  float out[kRowsPerThread][kColsPerThread] = {};
  const int value_steps = (p.nk + kValueKeys - 1) / kValueKeys;
  for (int step = 0; step < value_steps; ++step) {
    if (step + 1 < value_steps) {
      load_key_tile<kHeadDim, kValueKeys, kHeadDim>(stages + ((step + 1) & 1) * kStageFloats, v_mean,
                                                    (step + 1) * kValueKeys, p.nk, 0);
      ptx::cp_async_commit();
      ptx::cp_async_wait<1>();
    } else {
      ptx::cp_async_wait<0>();
    }
    __syncthreads();  // also orders step 2's weights before the first read
    const float* tile = stages + (step & 1) * kStageFloats;
#pragma unroll
    for (int j = 0; j < kValueKeys; j += 4) {
      float4 weight[kRowsPerThread];
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i)
        weight[i] = *reinterpret_cast<const float4*>(scores + (row_group + 8 * i) * p.score_pitch +
                                                     step * kValueKeys + j);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        float value[kColsPerThread];
        const float* src = tile + (j + u) * Smem::kValuePitch + col_group * kColsPerThread;
        if constexpr (kColsPerThread == 4) {
          const float4 v4 = *reinterpret_cast<const float4*>(src);
          value[0] = v4.x, value[1] = v4.y, value[2] = v4.z, value[3] = v4.w;
        } else {
          const float2 v2 = *reinterpret_cast<const float2*>(src);
          value[0] = v2.x, value[1] = v2.y;
        }
#pragma unroll
        for (int i = 0; i < kRowsPerThread; ++i) {
          const float w = u == 0 ? weight[i].x : u == 1 ? weight[i].y : u == 2 ? weight[i].z : weight[i].w;
#pragma unroll
          for (int c = 0; c < kColsPerThread; ++c) out[i][c] = fmaf(w, value[c], out[i][c]);
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int row = row_group + 8 * i;
    if (row >= valid_rows) continue;
    float* dst = p.coarse + (bh * p.nq + first_row + row) * kHeadDim + col_group * kColsPerThread;
#pragma unroll
    for (int c = 0; c < kColsPerThread; ++c) dst[c] = out[i][c] * row_scale[row];
  }
}

template <int kHeadDim, int kRows>
void launch(const CoarseParams& p, int batch, cudaStream_t stream) {
  const auto kernel = coarse_stage_kernel<kHeadDim, kRows>;
  const auto smem = static_cast<int>(SmemLayout<kHeadDim, kRows>::bytes(p.nk));
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
             "cudaFuncSetAttribute(coarse_stage_kernel)");
  const dim3 grid(static_cast<unsigned>((p.nq + kRows - 1) / kRows), static_cast<unsigned>(p.heads),
                  static_cast<unsigned>(batch));
  kernel<<<grid, kThreads, smem, stream>>>(p);
  check_launch("coarse_stage_kernel");
}

// Shared memory the hardware reserves per CTA (sm_80 and later).
constexpr std::size_t kReservedSmemPerCta = 1024;

// Query rows per CTA: the most (fewer CTAs re-read the key and value means)
// with which two CTAs share an SM, so one selects rows while the other
// multiplies; else the most that fit one CTA; 0 when not even 8 rows fit.
// VSA_COARSE_ROWS=8|16|32 overrides the choice where those rows fit (for
// measuring).
template <int kHeadDim>
int rows_per_cta(int nk, std::size_t cta_smem, std::size_t sm_smem) {
  const auto bytes = [nk](int rows) {
    return rows == 32 ? SmemLayout<kHeadDim, 32>::bytes(nk)
                      : rows == 16 ? SmemLayout<kHeadDim, 16>::bytes(nk) : SmemLayout<kHeadDim, 8>::bytes(nk);
  };
  if (const char* env = std::getenv("VSA_COARSE_ROWS")) {
    const int rows = std::atoi(env);
    if ((rows == 8 || rows == 16 || rows == 32) && bytes(rows) <= cta_smem) return rows;
  }
  for (const int ctas : {2, 1})
    for (const int rows : {32, 16, 8})
      if (bytes(rows) <= cta_smem && ctas * (bytes(rows) + kReservedSmemPerCta) <= sm_smem) return rows;
  return 0;
}

template <int kHeadDim>
void launch_for_dim(const CoarseParams& p, int batch, int device, cudaStream_t stream) {
  int cta_smem = 0, sm_smem = 0;
  check_cuda(cudaDeviceGetAttribute(&cta_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute(shared memory per block)");
  check_cuda(cudaDeviceGetAttribute(&sm_smem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device),
             "cudaDeviceGetAttribute(shared memory per SM)");
  const int rows = rows_per_cta<kHeadDim>(p.nk, static_cast<std::size_t>(cta_smem), static_cast<std::size_t>(sm_smem));
  if (rows == 0) {
    int limit = 1;
    while (SmemLayout<kHeadDim, 8>::bytes(limit + 1) <= static_cast<std::size_t>(cta_smem)) ++limit;
    throw Error(ErrorKind::unsupported, "k_mean.shape",
                "at most " + std::to_string(limit) +
                    " KV blocks on this GPU (the CUDA coarse stage keeps 8 rows of scores in shared memory)",
                "NK = " + std::to_string(p.nk));
  }
  if (rows == 32)
    launch<kHeadDim, 32>(p, batch, stream);
  else if (rows == 16)
    launch<kHeadDim, 16>(p, batch, stream);
  else
    launch<kHeadDim, 8>(p, batch, stream);
}

}  // namespace

void coarse_stage(const CoarseStageParams& params, float scale) {
  // Means are copied in 16-byte pieces, the output written in 8- or 16-byte ones.
  layer::require_aligned_blocks(params.q_mean, "q_mean");
  layer::require_aligned_blocks(params.k_mean, "k_mean");
  layer::require_aligned_blocks(params.v_mean, "v_mean");
  layer::require_aligned_blocks(params.coarse_out, "coarse_out");
  CoarseParams p{};
  p.q_mean = static_cast<const float*>(params.q_mean.data);
  p.k_mean = static_cast<const float*>(params.k_mean.data);
  p.v_mean = static_cast<const float*>(params.v_mean.data);
  p.vbs = params.variable_block_sizes.data;
  p.vbs_is_64 = params.variable_block_sizes.dtype == DType::i64;
  p.coarse = static_cast<float*>(params.coarse_out.data);
  p.q2k_idx = params.q2k_idx.data;
  p.q2k_num = params.q2k_num.data;
  p.lists_are_64 = params.q2k_idx.dtype == DType::i64;
  p.heads = static_cast<int>(params.q_mean.shape[1]);
  p.kv_group = static_cast<int>(params.q_mean.shape[1] / params.k_mean.shape[1]);
  p.nq = static_cast<int>(params.q_mean.shape[2]);
  p.nk = static_cast<int>(params.k_mean.shape[2]);
  p.topk = static_cast<int>(params.q2k_idx.shape[3]);
  p.score_pitch = score_pitch(p.nk);
  p.scale_log2 = scale * kLog2e;
  const int batch = static_cast<int>(params.q_mean.shape[0]);
  const DeviceGuard device(params.q_mean.device_index);
  const auto stream = static_cast<cudaStream_t>(params.stream);
  if (params.q_mean.shape[3] == 64)
    launch_for_dim<64>(p, batch, params.q_mean.device_index, stream);
  else
    launch_for_dim<128>(p, batch, params.q_mean.device_index, stream);
}

}  // namespace vsa::cuda
