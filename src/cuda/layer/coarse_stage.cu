// The coarse stage on the GPU: for kRows query blocks of one (batch, head),
// one CTA computes their scores against every KV block mean, keeps them in
// shared memory, selects each row's top-k blocks from them (the sorted q2k
// lists block_sparse_attn reads), turns them into softmax weights and
// multiplies by the value means. The [B, H, NQ, NK] score matrix never
// reaches global memory.
//
//   1. scores  the exact integer dot products of the means in block
//              floating point (core/layer_arithmetic.hpp: the CPU backend's
//              sums, bit for bit) on the integer tensor cores
//              (coarse_scores.cuh), stored as the order keys the selection
//              ranks: a warp takes 16-key tiles in turn against all rows.
//   2. per row: the take-th largest order key by a bitwise bisection
//              (one warp-wide count per bit, stopping as soon as the keys at
//              or above the prefix are exactly `take`), then the lists in id
//              order by ballots, ties to the lower id; then the softmax
//              weights, in place. A warp handles its rows together, so the
//              latency of one row's counts hides behind the others'.
//   3. coarse  Oᵀ = Vᵀ·Pᵀ on the tensor cores, 3xTF32 (tf32x3.cuh: about
//              float32 accuracy; the output's contract is a tolerance, only
//              the lists must be bit-identical): a warp owns kPvDimTiles
//              16-column tiles × all rows and 8 keys of each value tile; the
//              partial sums of the two key warps are added at the end.
//
// Stages (3, cp.async) stream each warp's slices of step 3's value tiles
// through a ring of its own, in one shared area that holds the query rows'
// quantized bytes during step 1.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/layer_arithmetic.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_guard.hpp"
#include "cuda/common/ptx.cuh"
#include "cuda/common/smem_opt_in.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/kernel_choice.hpp"
#include "cuda/layer/coarse_scores.cuh"
#include "cuda/layer/launch_checks.hpp"
#include "cuda/layer/tf32x3.cuh"
#include "cuda/tensor_views.hpp"

namespace vsa::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kGroupRows = 8;  // query rows per mma row tile (n8)
constexpr int kWidthKeys = 128;  // the score width's unit: the selection reads 4 keys per lane
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
  int score_width;  // keys per row of the shared score matrix (padding: weight 0)
  int score_pitch;  // floats from one row to the next
  float scale_log2;
};

__host__ __device__ constexpr int round_up(int x, int to) { return (x + to - 1) / to * to; }

// Keys per row of the shared score matrix: whole 128-key ranges (the padding
// holds weight 0).
__host__ __device__ constexpr int score_width(int nk) { return round_up(nk, kWidthKeys); }
// 4 floats more than the width (a multiple of 32), so the eight rows one Pᵀ
// fragment read touches lie in different banks; the row-wise reads and
// writes of steps 1 and 2 are 32 consecutive words either way.
__host__ __device__ constexpr int score_pitch(int nk) { return score_width(nk) + 4; }

// The shapes of one CTA: kRowGroups tiles of 8 query rows.
template <int kHeadDim, int kRowGroups>
struct Config {
  static constexpr int kRows = kGroupRows * kRowGroups;
  using Scores = coarse::ScoreShared<kHeadDim, kRows>;
  // Step 3: two key warps split each value tile's 16 keys (8 each, one k8 step); the other
  // warps split the columns, kPvDimTiles m16 tiles each, every row tile (n8) per warp.
  static constexpr int kPvKeyWarps = 2;
  static constexpr int kPvDimWarps = kWarps / kPvKeyWarps;
  static constexpr int kPvDimTiles = kHeadDim / 16 / kPvDimWarps;
  static constexpr int kValueKeys = 8 * kPvKeyWarps;
  // A warp's slice of a value tile (its 8 keys × its kPvDimTiles · 16 columns), in a ring of
  // its own: no other warp reads it, so step 3 needs no CTA-wide barrier per tile. The pitch
  // (≡ 8 or 24 mod 32) puts keys t and t + 4 of a fragment read in different banks: 8t + g.
  static constexpr int kSliceCols = kPvDimTiles * 16;
  static constexpr int kSlicePitch = kSliceCols + 8;
  static constexpr int kSliceFloats = 8 * kSlicePitch;
  static constexpr int kPartialPitch = kHeadDim + 4;
  static constexpr int kPartials = (kPvKeyWarps - 1) * kRows * kPartialPitch;  // step 3's partial sums
  static constexpr int kPlaneFloats = Scores::kPlaneBytes / 4;  // step 1's query bytes
  static constexpr int kAreaFloats = std::max({kWarps * kStages * kSliceFloats, kPartials, kPlaneFloats});
  static_assert(kPvDimTiles >= 1 && kWidthKeys % kValueKeys == 0, "value tiles end inside the score width");
  static_assert(Scores::kPlaneBytes % 16 == 0, "what follows the planes stays aligned");

  // Shared memory: [stage area | scores | row scales | row exponents, sums, finiteness | live
  // bits | live count | slack]. The slack (16 bytes, never written or used) is for nvcc's
  // 16-byte reads of the live bits' tail, up to 12 bytes past the live count:
  // compute-sanitizer memcheck reported them as out of bounds on the H200 (2026-11-30).
  static constexpr int kSlackWords = 4;
  __host__ __device__ static std::size_t bytes(int nk) {
    const auto pitch = static_cast<std::size_t>(score_pitch(nk));
    const auto width = static_cast<std::size_t>(score_width(nk));
    return 4 * (static_cast<std::size_t>(kAreaFloats) + kRows * pitch + 4 * kRows + width / 32 + 1 + kSlackWords);
  }
};

__device__ __forceinline__ void write_list_entry(void* p, bool is_64, std::int64_t i, int value) {
  if (is_64)
    static_cast<long long*>(p)[i] = value;
  else
    static_cast<int*>(p)[i] = value;
}

// The calling warp's slice of value tile `tile` into `slice`: keys tile · kValueKeys +
// 8 · key_warp + (0 .. 7), columns first_col + (0 .. kSliceCols − 1), kSlicePitch apart
// (keys past nk repeat the last one; their weights are 0). The copy loop's trip count is
// fixed at compile time, so it unrolls and each cp.async gets its own address registers (in
// a rolled loop the next piece's address overwrote registers an in-flight cp.async still
// held; ncu put ~6 % of the kernel's stall samples on that wait,
// bench/results/2026-12-01-h200-ce77c36).
template <int kHeadDim, class C>
__device__ void load_value_slice(float* slice, const float* v_mean, int tile, int key_warp, int first_col, int nk) {
  constexpr int kChunks = C::kSliceCols / 4;  // 16-byte pieces per key
  static_assert(8 * kChunks % 32 == 0, "whole rounds of the warp's lanes");
  const int lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
  for (int i = 0; i < 8 * kChunks / 32; ++i) {
    const int c = lane + 32 * i;
    const int key = c / kChunks, col = 4 * (c % kChunks);
    const int source_key = min(tile * C::kValueKeys + 8 * key_warp + key, nk - 1);
    ptx::cp_async_16(ptx::smem_addr(slice + key * C::kSlicePitch + col),
                     v_mean + static_cast<std::int64_t>(source_key) * kHeadDim + first_col + col);
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
__device__ __forceinline__ int count_at_least(const std::uint32_t* keys, int width, std::uint32_t cand) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  unsigned n0 = 0, n1 = 0;
  for (int j = 4 * lane; j < width; j += 4 * 32) {
    const uint4 k = *reinterpret_cast<const uint4*>(keys + j);
    n0 = add_if_at_least(add_if_at_least(n0, k.x, cand), k.y, cand);
    n1 = add_if_at_least(add_if_at_least(n1, k.z, cand), k.w, cand);
  }
  return static_cast<int>(__reduce_add_sync(kAll, n0 + n1));
}

// Where a row's bisection can start when take <= 64: every lane holds at
// least 4 keys, so 64 keys are at or above L, the least of the lanes'
// second largest keys, and none above M, the largest. The take-th largest
// key T lies in [L, M] and shares their common high bits: the search starts
// from that prefix at the highest bit where L and M differ (bit -1: T = L =
// M). This one pass replaces the ~7 count passes of the bits above.
struct SearchStart {
  std::uint32_t prefix;
  int bit;
};
__device__ __forceinline__ SearchStart search_start(const std::uint32_t* keys, int width) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  std::uint32_t largest = 0, second = 0;
  const auto add = [&](std::uint32_t key) {
    second = max(second, min(largest, key));
    largest = max(largest, key);
  };
  for (int j = 4 * lane; j < width; j += 4 * 32) {
    const uint4 k = *reinterpret_cast<const uint4*>(keys + j);
    add(k.x), add(k.y), add(k.z), add(k.w);
  }
  const std::uint32_t low = __reduce_min_sync(kAll, second), high = __reduce_max_sync(kAll, largest);
  if (low == high) return {low, -1};
  const int bit = 31 - __clz(static_cast<int>(low ^ high));
  return {high & ~((2u << bit) - 1u), bit};  // bit 31: 2u << 31 is 0, the mask 0
}

// One warp: rows first_row + r (r < kN, those below valid_rows) of the
// shared score matrix, which step 1 filled with order keys (0 for dead
// blocks and padding). Writes each row's top `take` live blocks (ties to the
// lower id) ascending, then -1 up to topk, and turns the row into
// unnormalized softmax weights in place (0 for dead blocks and padding);
// row_scale gets 1 / their sum (0 for a row with no live block).
template <int kN>
__device__ void select_rows(float* scores, int n_live, int first_row,
                            int valid_rows, const CoarseParams& p, std::int64_t first_list_row, float* row_scale) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int pitch = p.score_pitch, width = p.score_width;
  const int take = min(p.topk, n_live);
  bool active[kN];
#pragma unroll
  for (int r = 0; r < kN; ++r) active[r] = first_row + r < valid_rows;

  // The take-th largest key T (the largest with >= take keys at or above
  // it), bit by bit from the top (or from search_start's bit). A row stops
  // once exactly `take` keys are at or above its prefix: they are the
  // selection (ties_wanted = take takes every key equal to T). Else T is
  // exact and ties_wanted = take minus the keys above T.
  std::uint32_t threshold[kN];
  int at_threshold[kN], ties_wanted[kN], first_bit[kN];
#pragma unroll
  for (int r = 0; r < kN; ++r) {
    threshold[r] = take > 0 ? 0u : ~0u;  // take = 0 (no live block): nothing passes
    at_threshold[r] = n_live;
    ties_wanted[r] = take;
    first_bit[r] = 31;
  }
  if (take < n_live) {
    int top_bit = 31;
    if (take > 0 && take <= 64) {
      top_bit = -1;
#pragma unroll
      for (int r = 0; r < kN; ++r)
        if (active[r]) {
          const SearchStart start =
              search_start(reinterpret_cast<const std::uint32_t*>(scores + (first_row + r) * pitch), width);
          // At least take keys lie at or above the prefix; how many is not counted, so the
          // row keeps searching (at_threshold != take) until its last bit.
          threshold[r] = start.prefix;
          at_threshold[r] = -1;
          first_bit[r] = start.bit;
          top_bit = max(top_bit, start.bit);
        }
    }
    for (int bit = top_bit; bit >= 0; --bit) {
      bool searching = false;
#pragma unroll
      for (int r = 0; r < kN; ++r) searching |= active[r] && at_threshold[r] != take;
      if (!searching) break;
      int counts[kN];
#pragma unroll
      for (int r = 0; r < kN; ++r)
        counts[r] = active[r] && at_threshold[r] != take && bit <= first_bit[r]
                        ? count_at_least(reinterpret_cast<const std::uint32_t*>(scores + (first_row + r) * pitch),
                                         width, threshold[r] | (1u << bit))
                        : 0;
#pragma unroll
      for (int r = 0; r < kN; ++r)
        if (active[r] && at_threshold[r] != take && bit <= first_bit[r] && counts[r] >= take) {
          threshold[r] |= 1u << bit;
          at_threshold[r] = counts[r];
        }
    }
#pragma unroll
    for (int r = 0; r < kN; ++r)
      if (active[r] && at_threshold[r] != take) {
        const int above = threshold[r] == ~0u ? 0
                              : count_at_least(reinterpret_cast<const std::uint32_t*>(scores + (first_row + r) * pitch),
                                               width, threshold[r] + 1);
        ties_wanted[r] = take - above;
      }
  }

  // Ascending ids: live blocks above the threshold, and the first ties_wanted live blocks
  // equal to it. Live blocks hold keys >= 1 (step 1 stores no key 0 but for dead blocks and
  // padding), so the keys alone tell them apart; a threshold of 0 (every live block taken)
  // has no ties. Each 128-key range is read as four runs of 32 keys, a key per lane, so a
  // ballot per run gives every pick its place. The same pass finds each row's largest score
  // other than NaN, as its key plus kKeyLift: NaN's key (the largest) wraps to 0, every other
  // key keeps its order.
  constexpr std::uint32_t kKeyLift = 0u - coarse::kNanKey;
  constexpr std::uint32_t kMinusInfKey = 0x007fffffu;  // detail::score_key(-inf)
  const unsigned lower_lanes = (1u << lane) - 1u;
  std::uint32_t lifted_top[kN];
  int written[kN] = {}, ties_seen[kN] = {};
#pragma unroll
  for (int r = 0; r < kN; ++r) lifted_top[r] = kMinusInfKey + kKeyLift;
  for (int j0 = 0; j0 < width; j0 += 4 * 32) {
#pragma unroll
    for (int r = 0; r < kN; ++r) {
      if (!active[r]) continue;
      const auto* row_keys = reinterpret_cast<const std::uint32_t*>(scores + (first_row + r) * pitch) + j0 + lane;
      std::uint32_t key[4];
      bool pick[4], any_tie = false;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        key[e] = row_keys[32 * e];
        pick[e] = key[e] > threshold[r];
        any_tie |= key[e] == threshold[r] && threshold[r] != 0u;
        lifted_top[r] = max(lifted_top[r], key[e] + kKeyLift);
      }
      if (__any_sync(kAll, any_tie)) {  // ties at the threshold, taken in id order up to ties_wanted
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const bool tie = key[e] == threshold[r] && threshold[r] != 0u;
          const unsigned ties = __ballot_sync(kAll, tie);
          pick[e] |= tie && ties_seen[r] + __popc(ties & lower_lanes) < ties_wanted[r];
          ties_seen[r] += __popc(ties);
        }
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const unsigned picked = __ballot_sync(kAll, pick[e]);
        if (pick[e])
          write_list_entry(p.q2k_idx, p.lists_are_64,
                           (first_list_row + r) * p.topk + written[r] + __popc(picked & lower_lanes),
                           j0 + 32 * e + lane);
        written[r] += __popc(picked);
      }
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
    const float top = score_of(__reduce_max_sync(kAll, lifted_top[r]) - kKeyLift);
    // The top score's weight is exactly 1, as on the CPU.
    const auto weight = [&](std::uint32_t key) {  // 0 for dead blocks and padding (key 0)
      const float below_top = score_of(key) - top;
      return key != 0u ? (below_top == 0.0f ? 1.0f : ptx::exp2_fast(below_top * p.scale_log2)) : 0.0f;
    };
    float total = 0.0f;
    for (int j = 4 * lane; j < width; j += 4 * 32) {
      const uint4 k = *reinterpret_cast<const uint4*>(row + j);
      const float4 w = make_float4(weight(k.x), weight(k.y), weight(k.z), weight(k.w));
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

  extern __shared__ float4 smem_vec[];
  float* const area = reinterpret_cast<float*>(smem_vec);
  float* const scores = area + C::kAreaFloats;
  float* const row_scale = scores + kRows * p.score_pitch;
  int* const row_meta = reinterpret_cast<int*>(row_scale + kRows);  // exponents, sums, finiteness
  std::uint32_t* const live_bits = reinterpret_cast<std::uint32_t*>(row_meta + 3 * kRows);
  int* const live_count = reinterpret_cast<int*>(live_bits + p.score_width / 32);
  const typename C::Scores step1{reinterpret_cast<std::uint8_t*>(area), row_meta, row_meta + kRows,
                                 row_meta + 2 * kRows};

  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int head = static_cast<int>(blockIdx.y), batch = static_cast<int>(blockIdx.z);
  const int first_row = static_cast<int>(blockIdx.x) * kRows;
  const int valid_rows = min(kRows, p.nq - first_row);
  const std::int64_t bh = static_cast<std::int64_t>(batch) * p.heads + head;
  const std::int64_t kv_offset =
      (static_cast<std::int64_t>(batch) * (p.heads / p.kv_group) + head / p.kv_group) * p.nk * kHeadDim;
  const float* q_rows = p.q_mean + (bh * p.nq + first_row) * kHeadDim;
  const float* k_mean = p.k_mean + kv_offset;
  const float* v_mean = p.v_mean + kv_offset;

  // Live blocks (variable_block_sizes > 0) as bits up to the width, and their number.
  if (tid == 0) *live_count = 0;
  __syncthreads();
  for (int word = warp; word < p.score_width / 32; word += kWarps) {
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

  // ---- 1. scores, as order keys -----------------------------------------------------------------
  coarse::quantize_rows<kHeadDim, kRows>(q_rows, valid_rows, step1);
  __syncthreads();
  auto* const keys = reinterpret_cast<std::uint32_t*>(scores);
  coarse::score_tiles<kHeadDim, kRows>(k_mean, p.nk, valid_rows, live_bits, step1, keys, p.score_pitch);
  // The width's padding past the last 16-key tile: key 0.
  const int tiled = round_up(p.nk, 16), padding = p.score_width - tiled;
  for (int i = tid; i < kRows * padding; i += kThreads) keys[i / padding * p.score_pitch + tiled + i % padding] = 0u;
  __syncthreads();  // every score written, the query bytes in the area read

  // ---- 3's operands: each warp's first value slices load while the rows are selected.
  const int g = lane / 4, t = lane % 4;  // the lane's row and column in the mma fragments
  const int dim_warp = warp % C::kPvDimWarps, pv_key_warp = warp / C::kPvDimWarps;
  const int value_tiles = (p.nk + C::kValueKeys - 1) / C::kValueKeys;
  float* const ring = area + warp * kStages * C::kSliceFloats;
  const auto load_slice = [&](int tile) {
    if (tile < value_tiles)
      load_value_slice<kHeadDim, C>(ring + tile % kStages * C::kSliceFloats, v_mean, tile, pv_key_warp,
                                    dim_warp * C::kSliceCols, p.nk);
    ptx::cp_async_commit();
  };
#pragma unroll
  for (int tile = 0; tile < kStages - 1; ++tile) load_slice(tile);

  // ---- 2. selection and softmax weights ------------------------------------------------------
  constexpr int kWarpRows = kRows / kWarps;
  select_rows<kWarpRows>(scores, *live_count, warp * kWarpRows, valid_rows, p,
                         bh * p.nq + first_row + warp * kWarpRows, row_scale);
  __syncthreads();  // every row's weights, before any warp reads them

  // ---- 3. coarse output, Oᵀ = Vᵀ·Pᵀ -----------------------------------------------------------
  // The tensor cores' float32 accumulation truncates (its error grows with the number of
  // mma steps, biased: 1.6e-5 relative with 2,000 keys per warp), so each chunk of
  // kFoldTiles value tiles accumulates apart and is added to `out` in IEEE float32.
  constexpr int kFoldTiles = 4;
  float out[C::kPvDimTiles][kRowGroups][4] = {}, chunk[C::kPvDimTiles][kRowGroups][4] = {};
  for (int tile = 0; tile < value_tiles; ++tile) {
    ptx::cp_async_wait<kStages - 2>();
    __syncwarp();  // the slice's pieces from every lane; the stage refilled next was read a tile ago
    load_slice(tile + kStages - 1);
    const int first_key = tile * C::kValueKeys + 8 * pv_key_warp;
    if (first_key < p.nk) {
      const float* slice = ring + tile % kStages * C::kSliceFloats;
      tf32x3::FragB b[kRowGroups];  // Pᵀ: keys t and t + 4, row g
#pragma unroll
      for (int n = 0; n < kRowGroups; ++n) {
        const float* weights = scores + (8 * n + g) * p.score_pitch + first_key + t;
        b[n] = {{tf32x3::split(weights[0]), tf32x3::split(weights[4])}};
      }
#pragma unroll
      for (int m = 0; m < C::kPvDimTiles; ++m) {
        const float* v = slice + t * C::kSlicePitch + m * 16 + g;  // Vᵀ: column g, key t
        const tf32x3::FragA a = {{tf32x3::split(v[0]), tf32x3::split(v[8]), tf32x3::split(v[4 * C::kSlicePitch]),
                                  tf32x3::split(v[4 * C::kSlicePitch + 8])}};
#pragma unroll
        for (int n = 0; n < kRowGroups; ++n) tf32x3::mma3(chunk[m][n], a, b[n]);
      }
    }
    if ((tile + 1) % kFoldTiles == 0 || tile + 1 == value_tiles) {
#pragma unroll
      for (int m = 0; m < C::kPvDimTiles; ++m)
#pragma unroll
        for (int n = 0; n < kRowGroups; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) out[m][n][e] += chunk[m][n][e], chunk[m][n][e] = 0.0f;
    }
  }
  ptx::cp_async_wait<0>();
  __syncthreads();  // the area is free: it takes the partial sums

  // The second key warp's partial sums go through shared memory to the first, which adds them.
  float* const partials = area;
  const auto for_each_output = [&](auto&& f) {
#pragma unroll
    for (int m = 0; m < C::kPvDimTiles; ++m)
#pragma unroll
      for (int n = 0; n < kRowGroups; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          f(out[m][n][e], 8 * n + 2 * t + (e & 1), (dim_warp * C::kPvDimTiles + m) * 16 + g + (e >= 2 ? 8 : 0));
  };
  static_assert(C::kPvKeyWarps == 2, "one partial sum per output");
  if (pv_key_warp > 0)
    for_each_output([&](float value, int row, int col) { partials[row * C::kPartialPitch + col] = value; });
  __syncthreads();
  if (pv_key_warp > 0) return;
  for_each_output([&](float value, int row, int col) {
    if (row < valid_rows)
      p.coarse[(bh * p.nq + first_row + row) * kHeadDim + col] =
          (value + partials[row * C::kPartialPitch + col]) * row_scale[row];
  });
}

template <int kHeadDim, int kRowGroups>
void launch(const CoarseParams& p, int batch, cudaStream_t stream) {
  using C = Config<kHeadDim, kRowGroups>;
  constexpr auto kernel = coarse_stage_kernel<kHeadDim, kRowGroups>;
  const auto smem = static_cast<int>(C::bytes(p.nk));
  allow_dynamic_smem<kernel>(smem, "cudaFuncSetAttribute(coarse_stage_kernel)");
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
  p.score_width = score_width(p.nk);
  p.score_pitch = score_pitch(p.nk);
  p.scale_log2 = scale * kLog2e;
  if (params.q_mean.shape[0] > kMaxBatchHeads)  // the grid's z extent
    throw Error(ErrorKind::unsupported, "q_mean.shape",
                "a batch of at most " + std::to_string(kMaxBatchHeads) + " on CUDA", params.q_mean.shape_string());
  const int batch = static_cast<int>(params.q_mean.shape[0]);
  const DeviceGuard device(params.q_mean.device_index);
  const auto stream = static_cast<cudaStream_t>(params.stream);
  if (params.q_mean.shape[3] == 64)
    launch_for_dim<64>(p, batch, params.q_mean.device_index, stream);
  else
    launch_for_dim<128>(p, batch, params.q_mean.device_index, stream);
}

}  // namespace vsa::cuda
