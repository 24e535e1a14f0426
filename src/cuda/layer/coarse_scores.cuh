// Step 1 of the CUDA coarse stage: the scores as exact integer dot products of
// the means in block floating point (core/layer_arithmetic.hpp), on the
// integer tensor cores.
//
// A query row's Q_d (|Q_d| <= 2^22) are split into three bytes, Q = Q2·2^16 +
// Q1·2^8 + Q0 (Q0, Q1 unsigned, Q2 signed), kept in shared memory as three
// planes. A key's Q_d are taken offset, U = Q + 2^22 in [0, 2^23], from one
// rounding of a float add (U's three bytes all unsigned), so
//   Σ_d Q_q,d Q_k,d = Σ_{i,j} 2^(8(i+j)) Σ_d Q_i,d U_j,d − 2^22 Σ_d Q_q,d,
// nine m16n8k32 u8 products summed into five int32 accumulators by the shift
// i + j (each exact: at most 3 · 128 · 255² < 2^31), then combined in 64
// bits. The result is the CPU backend's sum, bit for bit.
#pragma once

#include <cstdint>

#include "core/layer_arithmetic.hpp"

namespace vsa::cuda::coarse {

constexpr unsigned kAllLanes = 0xffffffffu;
constexpr int kPieces = 3;                 // bytes per quantized element
constexpr int kGroups = 2 * kPieces - 1;   // accumulators per output: shifts 0, 8, .., 32
constexpr std::uint32_t kNanKey = 0xffc00000u;  // detail::score_key of the quiet NaN, as the CPU's NAN

// fma without .ftz: the build's --use_fast_math would flush subnormal inputs.
__device__ __forceinline__ float fma_keep_subnormals(float a, float b, float c) {
  float d;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));
  return d;
}

// 2^(kScoreBits − exponent) as two normal floats (exponent in [−149, 127]): a key's scale.
struct KeyScale {
  float first, second;
};
__device__ __forceinline__ KeyScale key_scale(int exponent) {
  const int total = detail::kScoreBits - exponent, half = total / 2;
  return {__uint_as_float(static_cast<std::uint32_t>(half + 127) << 23),
          __uint_as_float(static_cast<std::uint32_t>(total - half + 127) << 23)};
}

// U = Q + 2^22 of a finite key element, Q = RN(x · 2^(kScoreBits − E)): x times the two
// factors is exact (or so small that Q is 0 either way), and adding 1.5 · 2^23 rounds it to
// an integer, ties to even, as detail::quantize_mean does; the sum's bits minus those of
// 2^23 are then U.
__device__ __forceinline__ std::uint32_t offset_quantized(float x, KeyScale scale) {
  constexpr float kRounder = 12582912.0f;            // 1.5 · 2^23
  constexpr std::uint32_t kBaseBits = 0x4b000000u;  // 2^23
  const float scaled = fma_keep_subnormals(fma_keep_subnormals(x, scale.first, 0.0f), scale.second, kRounder);
  return __float_as_uint(scaled) - kBaseBits;
}

// Byte `piece` of each of four words, packed in order (the lowest k in the lowest byte).
__device__ __forceinline__ std::uint32_t gather_bytes(std::uint32_t w0, std::uint32_t w1, std::uint32_t w2,
                                                      std::uint32_t w3, int piece) {
  const std::uint32_t select = static_cast<std::uint32_t>(piece) | (static_cast<std::uint32_t>(piece + 4) << 4);
  return __byte_perm(__byte_perm(w0, w1, select), __byte_perm(w2, w3, select), 0x5410);
}

// D += A (16×32 u8) · B (32×8, u8 or s8), int32 accumulators.
template <bool kSignedB>
__device__ __forceinline__ void mma_bytes(int (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                          std::uint32_t b1) {
  if constexpr (kSignedB)
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Shared state of step 1, laid out by the kernel.
template <int kHeadDim, int kRows>
struct ScoreShared {
  static constexpr int kPlanePitch = kHeadDim + 16;  // bytes: the 8 rows of a B fragment in 32 banks
  static constexpr int kPlaneBytes = kPieces * kRows * kPlanePitch;
  std::uint8_t* planes;        // [kPieces][kRows][kPlanePitch] bytes of the query rows' Q
  int* row_exponent;           // [kRows] E of each query row
  int* row_sum;                // [kRows] Σ_d Q_q,d
  int* row_finite;             // [kRows] 0 when the row holds an inf or NaN
};

// The CTA's query rows (zero past valid_rows) in block floating point: Q's bytes into the
// planes, each row's exponent, Σ_d Q_d and finiteness. Warp w takes rows w, w + 8, ...
template <int kHeadDim, int kRows>
__device__ void quantize_rows(const float* q_rows, int valid_rows, const ScoreShared<kHeadDim, kRows>& s) {
  constexpr int kLaneCols = kHeadDim / 32;  // 4 or 2 consecutive columns per lane
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
  for (int row = warp; row < kRows; row += 8) {
    float x[kLaneCols] = {};
    if (row < valid_rows)
#pragma unroll
      for (int c = 0; c < kLaneCols; ++c) x[c] = q_rows[static_cast<std::int64_t>(row) * kHeadDim + kLaneCols * lane + c];
    detail::MagnitudeRange range;
#pragma unroll
    for (int c = 0; c < kLaneCols; ++c) range.add(x[c]);
    const std::uint32_t largest = __reduce_max_sync(kAllLanes, range.largest);
    const bool finite = __all_sync(kAllLanes, range.finite);
    const int exponent = detail::magnitude_exponent(largest);
    std::uint32_t packed[kPieces] = {};
    int sum = 0;
#pragma unroll
    for (int c = 0; c < kLaneCols; ++c) {
      const std::int32_t q = finite ? detail::quantize_mean(x[c], exponent) : 0;
      sum += q;
#pragma unroll
      for (int p = 0; p < kPieces; ++p) packed[p] |= ((static_cast<std::uint32_t>(q) >> (8 * p)) & 0xffu) << (8 * c);
    }
    sum = static_cast<int>(__reduce_add_sync(kAllLanes, static_cast<unsigned>(sum)));
#pragma unroll
    for (int p = 0; p < kPieces; ++p) {
      std::uint8_t* to = s.planes + (p * kRows + row) * ScoreShared<kHeadDim, kRows>::kPlanePitch + kLaneCols * lane;
      if constexpr (kLaneCols == 4)
        *reinterpret_cast<std::uint32_t*>(to) = packed[p];
      else
        *reinterpret_cast<std::uint16_t*>(to) = static_cast<std::uint16_t>(packed[p]);
    }
    if (lane == 0) {
      s.row_exponent[row] = exponent;
      s.row_sum[row] = sum;
      s.row_finite[row] = finite;
    }
  }
}

// The order keys of the CTA's rows against every key, into `keys` (row pitch `pitch`): a
// warp takes 16-key tiles in turn and all rows, kTileRows (<= 16) at a time. A tile's key
// means are loaded whole (a lane holds 32 elements of each of its two keys; the four lanes
// of a key find its exponent and finiteness together), then quantized as U = Q + 2^22.
// Keys past nk up to a multiple of 16, dead blocks and rows past valid_rows get key 0; a
// NaN score (a row or key holding an inf or NaN) kNanKey. Needs quantize_rows done (a
// barrier).
template <int kHeadDim, int kRows>
__device__ void score_tiles(const float* k_mean, int nk, int valid_rows, const std::uint32_t* live_bits,
                            const ScoreShared<kHeadDim, kRows>& s, std::uint32_t* keys, int pitch) {
  constexpr int kTileRows = kRows < 16 ? kRows : 16, kRowTiles = kTileRows / 8;
  constexpr int kPitch = ScoreShared<kHeadDim, kRows>::kPlanePitch;
  const int g = static_cast<int>(threadIdx.x % 32) / 4, t = static_cast<int>(threadIdx.x % 4);  // fragment row, column
  const int warp = static_cast<int>(threadIdx.x / 32);
  constexpr int kChunks = kHeadDim / 32;  // k32 steps
  for (int tile = warp; tile * 16 < nk; tile += 8) {
    // The lane's elements of keys g and g + 8 (h): columns 32c + 4t .. + 3 and 32c + 16 + 4t .. + 3.
    float4 x[2][kChunks][2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float* key_row = k_mean + static_cast<std::int64_t>(min(tile * 16 + g + 8 * h, nk - 1)) * kHeadDim + 4 * t;
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
#pragma unroll
        for (int half = 0; half < 2; ++half) x[h][c][half] = __ldg(reinterpret_cast<const float4*>(key_row + 32 * c + 16 * half));
    }
    // Each key's exponent and finiteness, over its four lanes (t).
    int key_exponent[2];
    bool key_finite[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      detail::MagnitudeRange range;
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
#pragma unroll
        for (int half = 0; half < 2; ++half)
          for (const float e : {x[h][c][half].x, x[h][c][half].y, x[h][c][half].z, x[h][c][half].w}) range.add(e);
#pragma unroll
      for (int step = 1; step < 4; step *= 2) {
        range.largest = max(range.largest, __shfl_xor_sync(kAllLanes, range.largest, step));
        range.finite = __shfl_xor_sync(kAllLanes, range.finite, step) && range.finite;
      }
      key_exponent[h] = detail::magnitude_exponent(range.largest);
      key_finite[h] = range.finite;
    }
    // Whether each key is live, once per tile.
    bool key_live[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = tile * 16 + g + 8 * h;
      key_live[h] = key < nk && ((live_bits[key >> 5] >> (key & 31)) & 1u);
    }
    // A fragments of every k32 step, per piece: a0 (g, 4t..), a1 (g + 8, 4t..), a2 (g, 16 + 4t..), a3.
    std::uint32_t a[kChunks][kPieces][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const KeyScale scale = key_scale(key_exponent[h]);
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const float4 v = x[h][c][half];
          const std::uint32_t u0 = offset_quantized(v.x, scale), u1 = offset_quantized(v.y, scale);
          const std::uint32_t u2 = offset_quantized(v.z, scale), u3 = offset_quantized(v.w, scale);
#pragma unroll
          for (int p = 0; p < kPieces; ++p) a[c][p][h + 2 * half] = gather_bytes(u0, u1, u2, u3, p);
        }
    }
#pragma unroll
    for (int first_row = 0; first_row < kRows; first_row += kTileRows) {
      int acc[kRowTiles][kGroups][4] = {};
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
#pragma unroll
        for (int n = 0; n < kRowTiles; ++n) {
          const std::uint8_t* row = s.planes + (first_row + 8 * n + g) * kPitch + 32 * c + 4 * t;
#pragma unroll
          for (int pq = 0; pq < kPieces; ++pq) {
            const std::uint8_t* plane = row + pq * kRows * kPitch;
            const std::uint32_t b0 = *reinterpret_cast<const std::uint32_t*>(plane);
            const std::uint32_t b1 = *reinterpret_cast<const std::uint32_t*>(plane + 16);
#pragma unroll
            for (int pk = 0; pk < kPieces; ++pk) {
              if (pq == kPieces - 1)
                mma_bytes<true>(acc[n][pk + pq], a[c][pk], b0, b1);
              else
                mma_bytes<false>(acc[n][pk + pq], a[c][pk], b0, b1);
            }
          }
        }
      // C: (key g + 8 (e / 2), row 2t + e % 2) of each row tile.
#pragma unroll
      for (int n = 0; n < kRowTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e >> 1, key = tile * 16 + g + 8 * h, row = first_row + 8 * n + 2 * t + (e & 1);
          std::int64_t sum = -static_cast<std::int64_t>(s.row_sum[row]) * (std::int64_t{1} << 22);
#pragma unroll
          for (int k = 0; k < kGroups; ++k) sum += static_cast<std::int64_t>(acc[n][k][e]) * (std::int64_t{1} << (8 * k));
          const int shift = detail::score_shift(s.row_exponent[row], key_exponent[h]);
          const std::uint32_t key_bits = detail::score_key(detail::score_rank(sum, shift));
          keys[row * pitch + key] = !(key_live[h] && row < valid_rows)    ? 0u
                                    : s.row_finite[row] && key_finite[h] ? key_bits
                                                                         : kNanKey;
        }
    }
  }
}

}  // namespace vsa::cuda::coarse
