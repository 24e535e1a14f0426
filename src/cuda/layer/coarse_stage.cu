// The coarse stage on the GPU: for kRows query blocks of one (batch, head),
// one CTA computes their scores against every KV block mean, keeps them in
// shared memory, selects each row's top-k blocks from them (the sorted q2k
// lists block_sparse_attn reads), turns them into softmax weights and
// multiplies by the value means. The [B, H, NQ, NK] score matrix never
// reaches global memory.
//
//   1. scores  S = Q·Kᵀ, a float32 FMA chain over d per score
//              (core/layer_arithmetic.hpp: bit-identical to the CPU backend).
//              A warp owns 8 query rows and 128 keys of a key tile; each lane
//              8 rows × 4 keys (lane, lane + 32, ...). The query values are
//              read as warp-wide broadcasts, so per 4 d a warp issues 8 + 4
//              16-byte shared reads (24 wavefronts) for 128 FMAs.
//   2. per row: the take-th largest order key by a bitwise bisection
//              (one warp-wide count per bit, stopping as soon as the keys at
//              or above the prefix are exactly `take`), then the lists in id
//              order by ballots, ties to the lower id; then the softmax
//              weights, in place. A warp handles its rows together, so the
//              latency of one row's counts hides behind the others'.
//   3. coarse  O = P·V: a warp owns 8 rows × all of d and 1 / kKeyWarps of
//              each value tile's keys (the weights again broadcasts); the
//              partial sums of a row's warps are added at the end.
//
// Stages (3, cp.async) stream the query and key columns of step 1 and the
// value tiles of step 3 through one shared area.
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
constexpr int kGroupRows = 8;              // query rows per warp, both products
constexpr int kLaneKeys = 4;               // keys per lane in the score product, 32 apart
constexpr int kWarpKeys = 32 * kLaneKeys;  // keys per warp per score tile
constexpr int kStages = 3;
constexpr unsigned kAll = 0xffffffffu;

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

// Floats per row of the shared score matrix: whole 128-key warp ranges (the
// padding holds weight 0). Every read of it is a broadcast or 32 consecutive
// words, so no bank padding is needed.
__host__ __device__ constexpr int score_pitch(int nk) { return round_up(nk, kWarpKeys); }

// The shapes of one CTA: kRowGroups groups of 8 query rows, each shared by
// kKeyWarps warps that split the keys.
template <int kHeadDim, int kRowGroups>
struct Config {
  static constexpr int kRows = kGroupRows * kRowGroups;
  static constexpr int kKeyWarps = kWarps / kRowGroups;
  static constexpr int kTileKeys = kWarpKeys * kKeyWarps;       // keys per score tile
  static constexpr int kScoreCols = kRowGroups == 4 ? 8 : 4;    // d columns per score stage
  static constexpr int kColSteps = kHeadDim / kScoreCols;       // stages per score tile
  // A score stage: the rows' columns [kRows][kScoreCols], then the keys' as
  // [kScoreCols / 4][kTileKeys][4], so a warp's 16-byte key reads are 512
  // consecutive bytes.
  static constexpr int kScoreStage = kRows * kScoreCols + kTileKeys * kScoreCols;
  static constexpr int kWarpValueKeys = kRowGroups == 4 ? 8 : 4;  // keys per warp per value tile
  static constexpr int kValueKeys = kWarpValueKeys * kKeyWarps;
  static constexpr int kValueStage = kValueKeys * kHeadDim;
  static constexpr int kPartials = (kKeyWarps - 1) * kRows * kHeadDim;  // step 3's partial sums
  static constexpr int kStageFloats = kScoreStage > kValueStage ? kScoreStage : kValueStage;
  static constexpr int kAreaFloats =
      kStages * kStageFloats > kPartials ? kStages * kStageFloats : kPartials;
  static_assert(kWarps % kRowGroups == 0 && kHeadDim % kScoreCols == 0, "shapes");
  static_assert(kWarpKeys % kValueKeys == 0, "value tiles end inside the score pitch");

  // Shared memory: [stage area | scores | row scales | live bits | live count | slack]. The slack
  // (16 bytes, never written or used) is for nvcc's 16-byte reads of the live bits' tail, up to
  // 12 bytes past the live count: compute-sanitizer memcheck reported them as out of bounds on
  // the H200 (2026-11-30).
  static constexpr int kSlackWords = 4;
  __host__ __device__ static std::size_t bytes(int nk) {
    const auto pitch = static_cast<std::size_t>(score_pitch(nk));
    return 4 * (static_cast<std::size_t>(kAreaFloats) + kRows * pitch + kRows + pitch / 32 + 1 + kSlackWords);
  }
};

__device__ __forceinline__ void write_list_entry(void* p, bool is_64, std::int64_t i, int value) {
  if (is_64)
    static_cast<long long*>(p)[i] = value;
  else
    static_cast<int*>(p)[i] = value;
}

// The 4 live bits of blocks j .. j + 3 (j a multiple of 4) in bits 0..3.
__device__ __forceinline__ unsigned live_nibble(const std::uint32_t* live_bits, int j) {
  return (live_bits[j >> 5] >> (j & 31)) & 0xfu;
}

// A score stage: columns [col0, col0 + kScoreCols) of the CTA's query rows
// (zero past valid_rows) and of kTileKeys keys from first_key (keys past nk
// repeat the last one: their scores are never used).
// The copy loops below have a trip count fixed at compile time, so they
// unroll and each cp.async gets its own address registers: in a rolled loop
// the next piece's address overwrote registers an in-flight cp.async still
// held, and ncu put ~6 % of the kernel's stall samples on that wait
// (bench/results/2026-12-01-h200-ce77c36).
template <int kPieces>
__host__ __device__ constexpr int pieces_per_thread() {
  static_assert(kPieces % kThreads == 0 || kPieces < kThreads, "whole rounds, or one partial round");
  return (kPieces + kThreads - 1) / kThreads;
}

template <int kHeadDim, class C>
__device__ void load_score_stage(float* stage, const float* q_rows, int valid_rows, const float* k_mean,
                                 int first_key, int nk, int col0) {
  constexpr int kChunks = C::kScoreCols / 4;  // 16-byte pieces per row
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int i = 0; i < pieces_per_thread<C::kRows * kChunks>(); ++i) {
    const int c = tid + i * kThreads;
    if (c >= C::kRows * kChunks) break;
    const int row = c / kChunks, col = 4 * (c % kChunks);
    float* to = stage + row * C::kScoreCols + col;
    if (row < valid_rows)
      ptx::cp_async_16(ptx::smem_addr(to), q_rows + static_cast<std::int64_t>(row) * kHeadDim + col0 + col);
    else
      *reinterpret_cast<float4*>(to) = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float* keys = stage + C::kRows * C::kScoreCols;
#pragma unroll
  for (int i = 0; i < pieces_per_thread<C::kTileKeys * kChunks>(); ++i) {
    const int c = tid + i * kThreads;
    const int key = c / kChunks, chunk = c % kChunks;
    ptx::cp_async_16(ptx::smem_addr(keys + (chunk * C::kTileKeys + key) * 4),
                     k_mean + static_cast<std::int64_t>(min(first_key + key, nk - 1)) * kHeadDim + col0 + 4 * chunk);
  }
}

// Value tile `tile`: kValueKeys rows of all kHeadDim columns (rows past nk
// repeat the last one; their weights are 0).
template <int kHeadDim, class C>
__device__ void load_value_tile(float* stage, const float* v_mean, int tile, int nk) {
  constexpr int kChunks = kHeadDim / 4;
#pragma unroll
  for (int i = 0; i < pieces_per_thread<C::kValueKeys * kChunks>(); ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * kThreads;
    const int key = c / kChunks, col = 4 * (c % kChunks);
    ptx::cp_async_16(ptx::smem_addr(stage + key * kHeadDim + col),
                     v_mean + static_cast<std::int64_t>(min(tile * C::kValueKeys + key, nk - 1)) * kHeadDim + col);
  }
}

// n + 1 where key >= cand, else n: a compare and a predicated add (nvcc
// makes three instructions of `n += key >= cand`).
__device__ __forceinline__ unsigned add_if_at_least(unsigned n, std::uint32_t key, std::uint32_t cand) {
  asm("{\n .reg .pred p;\n setp.ge.u32 p, %1, %2;\n @p add.u32 %0, %0, 1;\n}" : "+r"(n) : "r"(key), "r"(cand));
  return n;
}

// How many of the row's order keys are >= cand, over the warp (the row's
// dead and padding entries hold key 0, and cand >= 1).
__device__ __forceinline__ int count_at_least(const std::uint32_t* keys, int pitch, std::uint32_t cand) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  unsigned n0 = 0, n1 = 0;
  for (int j = 4 * lane; j < pitch; j += 4 * 32) {
    const uint4 k = *reinterpret_cast<const uint4*>(keys + j);
    n0 = add_if_at_least(add_if_at_least(n0, k.x, cand), k.y, cand);
    n1 = add_if_at_least(add_if_at_least(n1, k.z, cand), k.w, cand);
  }
  return static_cast<int>(__reduce_add_sync(kAll, n0 + n1));
}

// One warp: rows first_row + r (r < kN, those below valid_rows) of the
// shared score matrix. Writes each row's top `take` live blocks (ties to the
// lower id) ascending, then -1 up to topk, and turns the row into
// unnormalized softmax weights in place (0 for dead blocks and padding);
// row_scale gets 1 / their sum (0 for a row with no live block).
template <int kN>
__device__ void select_rows(float* scores, const std::uint32_t* live_bits, int n_live, int first_row,
                            int valid_rows, const CoarseParams& p, std::int64_t first_list_row, float* row_scale) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int pitch = p.score_pitch;
  const int take = min(p.topk, n_live);
  bool active[kN];
#pragma unroll
  for (int r = 0; r < kN; ++r) active[r] = first_row + r < valid_rows;

  // Scores -> order keys, in place; dead blocks and padding get key 0.
#pragma unroll
  for (int r = 0; r < kN; ++r) {
    if (!active[r]) continue;
    float* row = scores + (first_row + r) * pitch;
    for (int j = 4 * lane; j < pitch; j += 4 * 32) {
      const float4 s = *reinterpret_cast<const float4*>(row + j);
      const unsigned live = live_nibble(live_bits, j);
      const uint4 k = make_uint4(live & 1u ? detail::score_key(s.x) : 0u, live & 2u ? detail::score_key(s.y) : 0u,
                                 live & 4u ? detail::score_key(s.z) : 0u, live & 8u ? detail::score_key(s.w) : 0u);
      *reinterpret_cast<uint4*>(row + j) = k;
    }
  }
  __syncwarp();

  // The take-th largest key T (the largest with >= take keys at or above
  // it), bit by bit from the top. A row stops once exactly `take` keys are
  // at or above its prefix: they are the selection (ties_wanted = take takes
  // every key equal to T). Else T is exact and ties_wanted = take minus the
  // keys above T.
  std::uint32_t threshold[kN];
  int at_threshold[kN], ties_wanted[kN];
#pragma unroll
  for (int r = 0; r < kN; ++r) {
    threshold[r] = take > 0 ? 0u : ~0u;  // take = 0 (no live block): nothing passes
    at_threshold[r] = n_live;
    ties_wanted[r] = take;
  }
  if (take < n_live) {
    for (int bit = 31; bit >= 0; --bit) {
      bool searching = false;
#pragma unroll
      for (int r = 0; r < kN; ++r) searching |= active[r] && at_threshold[r] != take;
      if (!searching) break;
      int counts[kN];
#pragma unroll
      for (int r = 0; r < kN; ++r)
        counts[r] = active[r] && at_threshold[r] != take
                        ? count_at_least(reinterpret_cast<const std::uint32_t*>(scores + (first_row + r) * pitch),
                                         pitch, threshold[r] | (1u << bit))
                        : 0;
#pragma unroll
      for (int r = 0; r < kN; ++r)
        if (active[r] && at_threshold[r] != take && counts[r] >= take) {
          threshold[r] |= 1u << bit;
          at_threshold[r] = counts[r];
        }
    }
#pragma unroll
    for (int r = 0; r < kN; ++r)
      if (active[r] && at_threshold[r] != take) {
        const int above = threshold[r] == ~0u ? 0
                              : count_at_least(reinterpret_cast<const std::uint32_t*>(scores + (first_row + r) * pitch),
                                               pitch, threshold[r] + 1);
        ties_wanted[r] = take - above;
      }
  }

  // Ascending ids: live blocks above the threshold, and the first
  // ties_wanted live blocks equal to it.
  const unsigned lower_lanes = (1u << lane) - 1u;
  int written[kN] = {}, ties_seen[kN] = {};
  for (int j0 = 0; j0 < p.nk; j0 += 32) {
    const int j = j0 + lane;
    const bool live = (live_bits[j0 >> 5] >> lane) & 1u;  // 0 past nk
#pragma unroll
    for (int r = 0; r < kN; ++r) {
      if (!active[r]) continue;
      const std::uint32_t key = reinterpret_cast<const std::uint32_t*>(scores + (first_row + r) * pitch)[j];
      const bool tie = live && key == threshold[r];
      const unsigned ties = __ballot_sync(kAll, tie);
      const bool chosen =
          (live && key > threshold[r]) || (tie && ties_seen[r] + __popc(ties & lower_lanes) < ties_wanted[r]);
      const unsigned picked = __ballot_sync(kAll, chosen);
      if (chosen)
        write_list_entry(p.q2k_idx, p.lists_are_64,
                         (first_list_row + r) * p.topk + written[r] + __popc(picked & lower_lanes), j);
      written[r] += __popc(picked);
      ties_seen[r] += __popc(ties);
    }
  }
#pragma unroll
  for (int r = 0; r < kN; ++r) {
    if (!active[r]) continue;
    for (int e = written[r] + lane; e < p.topk; e += 32)
      write_list_entry(p.q2k_idx, p.lists_are_64, (first_list_row + r) * p.topk + e, -1);
    if (lane == 0) write_list_entry(p.q2k_num, p.lists_are_64, first_list_row + r, written[r]);
  }

  // Softmax weights from the keys (the key maps back to the score's bits;
  // -0 comes back as +0, which gives the same weight).
  const auto score_of = [](std::uint32_t key) {
    return __uint_as_float(key & 0x80000000u ? key & 0x7fffffffu : ~key);
  };
#pragma unroll
  for (int r = 0; r < kN; ++r) {
    if (!active[r]) continue;
    float* row = scores + (first_row + r) * pitch;
    float top = -INFINITY;
    for (int j = 4 * lane; j < pitch; j += 4 * 32) {
      const uint4 k = *reinterpret_cast<const uint4*>(row + j);
      const unsigned live = live_nibble(live_bits, j);
      if (live & 1u) top = fmaxf(top, score_of(k.x));
      if (live & 2u) top = fmaxf(top, score_of(k.y));
      if (live & 4u) top = fmaxf(top, score_of(k.z));
      if (live & 8u) top = fmaxf(top, score_of(k.w));
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) top = fmaxf(top, __shfl_xor_sync(kAll, top, offset));
    const auto weight = [&](std::uint32_t key, bool live) {
      return live ? ptx::exp2_fast((score_of(key) - top) * p.scale_log2) : 0.0f;
    };
    float total = 0.0f;
    for (int j = 4 * lane; j < pitch; j += 4 * 32) {
      const uint4 k = *reinterpret_cast<const uint4*>(row + j);
      const unsigned live = live_nibble(live_bits, j);
      const float4 w = make_float4(weight(k.x, live & 1u), weight(k.y, live & 2u), weight(k.z, live & 4u),
                                   weight(k.w, live & 8u));
      *reinterpret_cast<float4*>(row + j) = w;
      total += (w.x + w.y) + (w.z + w.w);
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) total += __shfl_xor_sync(kAll, total, offset);
    if (lane == 0) row_scale[first_row + r] = total > 0.0f ? 1.0f / total : 0.0f;
  }
}

template <int kHeadDim, int kRowGroups>
__global__ void __launch_bounds__(kThreads, 2) coarse_stage_kernel(const CoarseParams p) {
  using C = Config<kHeadDim, kRowGroups>;
  constexpr int kRows = C::kRows;
  constexpr int kLaneCols = kHeadDim / 32;  // of the P·V output

  extern __shared__ float4 smem_vec[];
  float* const area = reinterpret_cast<float*>(smem_vec);
  float* const scores = area + C::kAreaFloats;
  float* const row_scale = scores + kRows * p.score_pitch;
  std::uint32_t* const live_bits = reinterpret_cast<std::uint32_t*>(row_scale + kRows);
  int* const live_count = reinterpret_cast<int*>(live_bits + p.score_pitch / 32);

  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int row_group = warp / C::kKeyWarps, key_warp = warp % C::kKeyWarps;
  const int group_row = row_group * kGroupRows;  // the warp's rows: group_row + i, i < 8
  const int head = static_cast<int>(blockIdx.y), batch = static_cast<int>(blockIdx.z);
  const int first_row = static_cast<int>(blockIdx.x) * kRows;
  const int valid_rows = min(kRows, p.nq - first_row);
  const std::int64_t bh = static_cast<std::int64_t>(batch) * p.heads + head;
  const std::int64_t kv_offset =
      (static_cast<std::int64_t>(batch) * (p.heads / p.kv_group) + head / p.kv_group) * p.nk * kHeadDim;
  const float* q_rows = p.q_mean + (bh * p.nq + first_row) * kHeadDim;
  const float* k_mean = p.k_mean + kv_offset;
  const float* v_mean = p.v_mean + kv_offset;

  // Live blocks (variable_block_sizes > 0) as bits up to the pitch, and their number.
  if (tid == 0) *live_count = 0;
  __syncthreads();
  for (int word = warp; word < p.score_pitch / 32; word += kWarps) {
    const int j = 32 * word + lane;
    const long long size = j < p.nk ? (p.vbs_is_64 ? static_cast<const long long*>(p.vbs)[j]
                                                   : static_cast<const int*>(p.vbs)[j])
                                    : 0;
    const unsigned bits = __ballot_sync(kAll, size > 0);
    if (lane == 0) {
      live_bits[word] = bits;
      atomicAdd(live_count, __popc(bits));
    }
  }

  // ---- 1. scores -----------------------------------------------------------------------------
  // Step s: score tile s / kColSteps, columns of stage s % kColSteps. One barrier per step: the
  // stage refilled after it was last read before the previous step's barrier.
  const int score_steps = (p.nk + C::kTileKeys - 1) / C::kTileKeys * C::kColSteps;
  const auto load_step = [&](int step) {
    if (step < score_steps)
      load_score_stage<kHeadDim, C>(area + step % kStages * C::kStageFloats, q_rows, valid_rows, k_mean,
                                    step / C::kColSteps * C::kTileKeys, p.nk, step % C::kColSteps * C::kScoreCols);
    ptx::cp_async_commit();  // empty past the end: the group count stays uniform
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) load_step(s);
  float acc[kGroupRows][kLaneKeys] = {};
  for (int step = 0; step < score_steps; ++step) {
    ptx::cp_async_wait<kStages - 2>();
    __syncthreads();
    load_step(step + kStages - 1);
    const int col_step = step % C::kColSteps;
    const int first_key = step / C::kColSteps * C::kTileKeys + key_warp * kWarpKeys;
    if (first_key >= p.nk) continue;  // the whole warp: its keys are past the last block
    const float* stage = area + step % kStages * C::kStageFloats;
    const float* keys = stage + kRows * C::kScoreCols + (key_warp * kWarpKeys + lane) * 4;
#pragma unroll
    for (int d = 0; d < C::kScoreCols; d += 4) {
      float4 key[kLaneKeys];
#pragma unroll
      for (int m = 0; m < kLaneKeys; ++m)
        key[m] = *reinterpret_cast<const float4*>(keys + (d / 4 * C::kTileKeys + 32 * m) * 4);
#pragma unroll
      for (int i = 0; i < kGroupRows; ++i) {
        const float4 query = *reinterpret_cast<const float4*>(stage + (group_row + i) * C::kScoreCols + d);
#pragma unroll
        for (int m = 0; m < kLaneKeys; ++m) {
          acc[i][m] = detail::score_step(query.x, key[m].x, acc[i][m]);
          acc[i][m] = detail::score_step(query.y, key[m].y, acc[i][m]);
          acc[i][m] = detail::score_step(query.z, key[m].z, acc[i][m]);
          acc[i][m] = detail::score_step(query.w, key[m].w, acc[i][m]);
        }
      }
    }
    if (col_step == C::kColSteps - 1) {
      // Keys past nk (up to the pitch) get score 0: padding, never live.
#pragma unroll
      for (int m = 0; m < kLaneKeys; ++m) {
        const int key = first_key + lane + 32 * m;
#pragma unroll
        for (int i = 0; i < kGroupRows; ++i)
          scores[(group_row + i) * p.score_pitch + key] = key < p.nk ? acc[i][m] : 0.0f;
      }
#pragma unroll
      for (int i = 0; i < kGroupRows; ++i)
#pragma unroll
        for (int m = 0; m < kLaneKeys; ++m) acc[i][m] = 0.0f;
    }
  }
  ptx::cp_async_wait<0>();
  __syncthreads();  // every stage read, every score written

  // The first value tiles load while the rows are selected.
  const int value_tiles = (p.nk + C::kValueKeys - 1) / C::kValueKeys;
  const auto load_tile = [&](int tile) {
    if (tile < value_tiles) load_value_tile<kHeadDim, C>(area + tile % kStages * C::kStageFloats, v_mean, tile, p.nk);
    ptx::cp_async_commit();
  };
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) load_tile(t);

  // ---- 2. selection and softmax weights ------------------------------------------------------
  constexpr int kWarpRows = kRows / kWarps;
  select_rows<kWarpRows>(scores, live_bits, *live_count, warp * kWarpRows, valid_rows, p,
                         bh * p.nq + first_row + warp * kWarpRows, row_scale);

  // ---- 3. coarse output = P·V ----------------------------------------------------------------
  float out[kGroupRows][kLaneCols] = {};
  for (int tile = 0; tile < value_tiles; ++tile) {
    ptx::cp_async_wait<kStages - 2>();
    __syncthreads();  // also orders step 2's weights before the first read
    load_tile(tile + kStages - 1);
    const int first_key = tile * C::kValueKeys + key_warp * C::kWarpValueKeys;
    if (first_key >= p.nk) continue;
    const float* values = area + tile % kStages * C::kStageFloats + (key_warp * C::kWarpValueKeys) * kHeadDim +
                          lane * kLaneCols;
#pragma unroll
    for (int j = 0; j < C::kWarpValueKeys; j += 4) {
      float4 weight[kGroupRows];
#pragma unroll
      for (int i = 0; i < kGroupRows; ++i)
        weight[i] = *reinterpret_cast<const float4*>(scores + (group_row + i) * p.score_pitch + first_key + j);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        float value[kLaneCols];
        const float* src = values + (j + u) * kHeadDim;
        if constexpr (kLaneCols == 4) {
          const float4 v4 = *reinterpret_cast<const float4*>(src);
          value[0] = v4.x, value[1] = v4.y, value[2] = v4.z, value[3] = v4.w;
        } else {
          const float2 v2 = *reinterpret_cast<const float2*>(src);
          value[0] = v2.x, value[1] = v2.y;
        }
#pragma unroll
        for (int i = 0; i < kGroupRows; ++i) {
          const float w = u == 0 ? weight[i].x : u == 1 ? weight[i].y : u == 2 ? weight[i].z : weight[i].w;
#pragma unroll
          for (int c = 0; c < kLaneCols; ++c) out[i][c] = fmaf(w, value[c], out[i][c]);
        }
      }
    }
  }
  ptx::cp_async_wait<0>();
  __syncthreads();  // the area is free: it takes the partial sums

  // The warps of a row group add their partial sums in key-warp order.
  float* const partials = area;
  const auto partial = [&](int k, int i) {
    return partials + ((k - 1) * kRows + group_row + i) * kHeadDim + lane * kLaneCols;
  };
  if (key_warp > 0) {
#pragma unroll
    for (int i = 0; i < kGroupRows; ++i)
#pragma unroll
      for (int c = 0; c < kLaneCols; ++c) partial(key_warp, i)[c] = out[i][c];
  }
  __syncthreads();
  if (key_warp > 0) return;
#pragma unroll
  for (int i = 0; i < kGroupRows; ++i) {
    const int row = group_row + i;
    if (row >= valid_rows) continue;
    for (int k = 1; k < C::kKeyWarps; ++k)
#pragma unroll
      for (int c = 0; c < kLaneCols; ++c) out[i][c] += partial(k, i)[c];
    float* dst = p.coarse + (bh * p.nq + first_row + row) * kHeadDim + lane * kLaneCols;
#pragma unroll
    for (int c = 0; c < kLaneCols; ++c) dst[c] = out[i][c] * row_scale[row];
  }
}

template <int kHeadDim, int kRowGroups>
void launch(const CoarseParams& p, int batch, cudaStream_t stream) {
  using C = Config<kHeadDim, kRowGroups>;
  const auto kernel = coarse_stage_kernel<kHeadDim, kRowGroups>;
  const auto smem = static_cast<int>(C::bytes(p.nk));
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
             "cudaFuncSetAttribute(coarse_stage_kernel)");
  const dim3 grid(static_cast<unsigned>((p.nq + C::kRows - 1) / C::kRows), static_cast<unsigned>(p.heads),
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
    return rows == 32 ? Config<kHeadDim, 4>::bytes(nk)
                      : rows == 16 ? Config<kHeadDim, 2>::bytes(nk) : Config<kHeadDim, 1>::bytes(nk);
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
    while (Config<kHeadDim, 1>::bytes(limit + 1) <= static_cast<std::size_t>(cta_smem)) ++limit;
    throw Error(ErrorKind::unsupported, "k_mean.shape",
                "at most " + std::to_string(limit) +
                    " KV blocks on this GPU (the CUDA coarse stage keeps 8 rows of scores in shared memory)",
                "NK = " + std::to_string(p.nk));
  }
  if (rows == 32)
    launch<kHeadDim, 4>(p, batch, stream);
  else if (rows == 16)
    launch<kHeadDim, 2>(p, batch, stream);
  else
    launch<kHeadDim, 1>(p, batch, stream);
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
