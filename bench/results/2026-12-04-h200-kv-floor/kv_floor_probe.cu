// Session 36's probe: how fast the H200 can bring a 64-token forward's K and V tiles from L2
// into the SMs, with nothing else to do. Forward v2's grid (a CTA per 64-row query tile, each
// walking its own list, lists phased as kernel_choice.hpp phases them) and its TMA requests
// (request_key_tile: a partial tile's padding rows are out-of-bounds rows, never read), but no
// products, no softmax, no Q and no output: one thread per CTA keeps `stages` K+V tile pairs
// in flight and re-requests a stage as soon as its bytes have landed. C CTAs per SM are forced
// through the shared memory each asks for. Each shape runs on v2's grid and on a persistent one
// (Steps, below). The least time over them is a floor for any forward that reads each listed
// K/V tile once per 64-row query tile.
//
// Built against the project's own headers and its CUDA library (for the tensor maps):
//   nvcc -std=c++20 -O3 -arch=sm_90a -I src -I include kv_floor_probe.cu \
//        build/gpu/src/cuda/libvsa_cuda.a -o kv_floor_probe
//   kv_floor_probe heads num_blocks topk T H W sms oob|whole|rows [same] [quick] [groups]
// T H W: the latent whose 4x4x4 tiles are the blocks (partial at its edges), t outermost;
// 0 0 0 for whole blocks. sms: the SMs to phase the walks by (0: list order). oob|whole|rows: how
// a partial block's tiles are requested (Partial). `same`: every query block lists the same
// blocks (the most L2 reuse), else independent random lists. `quick`: v2's grid at 2-6 CTAs an
// SM only (the shapes that came out best). `groups` (with `whole`): also CTAs of 2 and 4 query
// tiles that request each block their sorted lists share once (UnionSteps): a floor for a
// forward that reads a K/V tile once for the query tiles of a CTA. TB/s counts the real keys' bytes.
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cuda/common/list_walk.cuh"
#include "cuda/common/query_scheduler.cuh"
#include "cuda/sm90/swizzled_tile.cuh"
#include "cuda/sm90/tensor_maps.hpp"

namespace {

using namespace vsa::cuda;
using namespace vsa::cuda::sm90;

// How a partial block's tile is requested: v2's box over its real keys with its padding rows out
// of bounds (zeros, not read); the whole 64-row tile, padding rows read from memory; or its real
// rows rounded up to 8, as boxes of 32, 16 and 8 rows from the tile's first row.
enum class Partial { oob, whole, rows };

struct ProbeParams {
  FwdTensorMaps maps;  // first: 64-byte aligned
  CUtensorMap k_rows[3], v_rows[3];  // K and V with boxes of 32, 16 and 8 rows (Partial::rows)
  FwdKernelParams p;
  int ctas_per_sm;
  Partial partial;
};

constexpr std::uint32_t kTileBytes = SwizzledTile<128>::kBytes;  // 16 KB: K or V, D = 128

// The grid's steps, in the order a CTA takes them: one query tile's list (one CTA per tile, as v2
// launches), or, persistent, the tiles blockIdx.x, blockIdx.x + gridDim.x, ... of all heads (head
// outermost, so the CTAs resident at once walk one head's lists together), one stage ring across
// them, so no CTA starts or ends inside the walk.
struct KeyTile {
  std::int64_t key;
  int valid, head;
  bool any;  // false: no step left
};

template <bool kPersistent>
struct Steps {
  const FwdKernelParams& p;
  int item, t, n;  // the current item (head * NQ + query tile), its step, its tiles
  __device__ explicit Steps(const FwdKernelParams& params) : p(params), item(first()), t(0), n(tiles()) { skip(); }
  __device__ int first() const {
    return kPersistent ? static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.y) * p.num_q_blocks + blockIdx.x;
  }
  __device__ bool done() const { return kPersistent ? item >= p.heads * p.num_q_blocks : t >= n; }
  __device__ QueryScheduler<kTileRows> sched() const {
    return QueryScheduler<kTileRows>(p, 0, item / p.num_q_blocks, item % p.num_q_blocks);
  }
  __device__ int tiles() const {
    return kPersistent && item >= p.heads * p.num_q_blocks ? 0 : sched().num_tiles();
  }
  __device__ void skip() {  // past items with no tiles
    while (kPersistent && !done() && t >= n) {
      item += static_cast<int>(gridDim.x);
      t = 0;
      n = tiles();
    }
  }
  __device__ void advance() {
    ++t;
    skip();
  }
  // The step the walk is at: its tile's first key and real keys; then the walk moves on.
  __device__ KeyTile next(int period) {
    if (done()) return KeyTile{0, 0, 0, false};
    const QueryScheduler<kTileRows> s = sched();
    const int j = kPersistent ? t : ListWalk(period, p.walk_ramp_waves, n).tile_at(t);
    const std::int64_t block = s.block_of(j);
    const KeyTile tile{s.first_key(j, block), s.valid_keys(j, block), s.kv_head(), true};
    advance();
    return tile;
  }
};

// A CTA of kGroup query tiles (blockIdx.x * kGroup on, of head blockIdx.y): their sorted lists
// merged, each block any of them lists requested once (whole blocks of 64 keys).
template <int kGroup>
struct UnionSteps {
  const FwdKernelParams& p;
  int head;
  std::int64_t list[kGroup], front[kGroup];  // front: the block at pos, or none left (INT64_MAX)
  int pos[kGroup], n[kGroup];
  __device__ explicit UnionSteps(const FwdKernelParams& params) : p(params), head(static_cast<int>(blockIdx.y)) {
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      const int q = static_cast<int>(blockIdx.x) * kGroup + g;
      const std::int64_t row = static_cast<std::int64_t>(head) * p.num_q_blocks + q;
      n[g] = q < p.num_q_blocks ? static_cast<int>(load_meta(p.q2k_num, p.num_is_64, row)) : 0;
      list[g] = row * p.max_kv;
      pos[g] = 0;
      front[g] = read(g);
    }
  }
  __device__ std::int64_t read(int g) const {
    return pos[g] < n[g] ? load_meta(p.q2k_idx, p.idx_is_64, list[g] + pos[g]) : INT64_MAX;
  }
  __device__ KeyTile next(int) {
    std::int64_t block = INT64_MAX;
#pragma unroll
    for (int g = 0; g < kGroup; ++g) block = front[g] < block ? front[g] : block;
    if (block == INT64_MAX) return KeyTile{0, 0, 0, false};
#pragma unroll
    for (int g = 0; g < kGroup; ++g)
      if (front[g] == block) {
        ++pos[g];
        front[g] = read(g);
      }
    const int valid = static_cast<int>(load_meta(p.vbs, p.vbs_is_64, block));
    return KeyTile{block * kTileRows, valid < kTileRows ? valid : kTileRows, head / p.kv_group, true};
  }
};

template <int kStages, class Walk>
__global__ void __launch_bounds__(32) kv_floor(const __grid_constant__ ProbeParams params) {
  if (threadIdx.x != 0) return;
  const FwdKernelParams& p = params.p;
  extern __shared__ __align__(1024) unsigned char smem[];
  const std::uint32_t base = (ptx::smem_addr(smem) + 1023u) & ~1023u;
  const std::uint32_t bars = base + kStages * 2 * kTileBytes;
  for (int s = 0; s < kStages; ++s) mbarrier_init(bars + 8 * s, 2);  // K's and V's requests
  mbarrier_init_fence();

  const int period = p.walk_sms * params.ctas_per_sm;
  const auto load = [&](std::uint32_t dst, std::uint32_t bar, const CUtensorMap& map, const CUtensorMap* rows,
                        const KeyTile& tile) {
    const int real = (tile.valid + 7) & ~7;  // 57-63 real keys: 64 rows, the whole box
    if (real == kTileRows || params.partial != Partial::rows) {
      const int pad = params.partial == Partial::oob ? kTileRows - tile.valid : 0;
      request_key_tile<128>(dst, bar, map, tile.key, tile.head, 0, pad);
      return;
    }
    mbarrier_expect_bytes(bar, static_cast<std::uint32_t>(real) * 256u);  // 256 bytes a row at D = 128
    int row = 0;
    for (int piece = 0; piece < 3; ++piece) {
      const int height = 32 >> piece;
      if ((real & height) == 0) continue;
      for (int c = 0; c < 2; ++c)
        tma_load_5d(dst + c * SwizzledTile<128>::kBlockBytes + row * 128, rows[piece], bar, 64 * c, row,
                    static_cast<int>(tile.key / kTileRows), tile.head, 0);
      row += height;
    }
  };
  const auto request = [&](int g, const KeyTile& tile) {
    const int s = g % kStages;
    const std::uint32_t dst = base + s * 2 * kTileBytes;
    load(dst, bars + 8 * s, params.maps.k, params.k_rows, tile);
    load(dst + kTileBytes, bars + 8 * s, params.maps.v, params.v_rows, tile);
  };
  Walk ahead(p);
  int requested = 0;
  for (; requested < kStages; ++requested) {
    const KeyTile tile = ahead.next(period);
    if (!tile.any) break;
    request(requested, tile);
  }
  for (int g = 0; g < requested; ++g) {
    const KeyTile next = ahead.next(period);  // its dependent loads under the wait
    mbarrier_wait(bars + 8 * (g % kStages), static_cast<std::uint32_t>(g / kStages) & 1u);
    if (next.any) request(requested++, next);
  }
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

template <class T>
T* to_device(const std::vector<T>& host) {
  T* device = nullptr;
  check(cudaMalloc(&device, host.size() * sizeof(T)), "cudaMalloc");
  check(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return device;
}

// K or V as v2's 5-D [B][H][S / 64][64][D] key map (tensor_maps.cu), with boxes of `height` rows.
bool encode_key_rows(CUtensorMap& map, const void* data, int heads, std::int64_t seq, int height) {
  void* symbol = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &symbol, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return false;
  const auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(symbol);
  const cuuint64_t dims[5] = {128, static_cast<cuuint64_t>(kTileRows), static_cast<cuuint64_t>(seq / kTileRows),
                              static_cast<cuuint64_t>(heads), 1};
  const cuuint64_t strides[4] = {256, 256 * kTileRows, static_cast<cuuint64_t>(seq) * 256, 16};
  const cuuint32_t box[5] = {64, static_cast<cuuint32_t>(height), 1, 1, 1}, unit[5] = {1, 1, 1, 1, 1};
  return encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 5, const_cast<void*>(data), dims, strides, box, unit,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Median of 30 timed launches after 5 warm-up ones, in ms.
// Walk: Steps<persistent> or UnionSteps<group>; grid: its launch's.
template <int kStages, class Walk>
double time_ms(const ProbeParams& params, dim3 grid) {
  // Exactly C CTAs per SM: each asks for 1/C of the SM's 228 KB, less the 1 KB the SM keeps a CTA.
  const int smem = std::min(232448, 233472 / params.ctas_per_sm - 1024);
  const int need = kStages * 2 * static_cast<int>(kTileBytes) + 1024 + 8 * kStages;
  if (need > smem) return -1.0;
  check(cudaFuncSetAttribute(kv_floor<kStages, Walk>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "attribute");
  const auto launch = [&] { kv_floor<kStages, Walk><<<grid, 32, smem>>>(params); };
  for (int i = 0; i < 5; ++i) launch();
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  std::vector<float> ms;
  for (int i = 0; i < 30; ++i) {
    check(cudaEventRecord(start), "record");
    launch();
    check(cudaEventRecord(stop), "record");
    check(cudaEventSynchronize(stop), "sync");
    float t = 0.0f;
    check(cudaEventElapsedTime(&t, start, stop), "elapsed");
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 9) {
    std::fprintf(stderr,
                 "usage: kv_floor_probe heads num_blocks topk T H W sms oob|whole|rows [same] [quick] [groups]\n");
    return 1;
  }
  const int heads = std::atoi(argv[1]), nk = std::atoi(argv[2]), topk = std::atoi(argv[3]);
  const int lt = std::atoi(argv[4]), lh = std::atoi(argv[5]), lw = std::atoi(argv[6]);
  const int sms = std::atoi(argv[7]);
  const std::string_view partial = argv[8];
  // quick: v2's grid at 2-6 CTAs an SM only; groups (with whole): also the union walks of 2 and 4
  // query tiles' lists.
  bool same = false, quick = false, groups = false;
  for (int i = 9; i < argc; ++i) {
    same = same || std::string_view(argv[i]) == "same";
    quick = quick || std::string_view(argv[i]) == "quick";
    groups = groups || std::string_view(argv[i]) == "groups";
  }
  constexpr int kDim = 128;
  const std::int64_t seq = static_cast<std::int64_t>(nk) * kTileRows, elems = heads * seq * kDim;

  // Real keys of each block: whole, or the 4x4x4 tiles of a T x H x W latent (t outermost).
  std::vector<std::int32_t> vbs(nk, kTileRows);
  if (lt > 0) {
    const int th = (lh + 3) / 4, tw = (lw + 3) / 4;
    if ((lt + 3) / 4 * th * tw != nk) {
      std::fprintf(stderr, "the latent's tiles are not num_blocks\n");
      return 1;
    }
    for (int j = 0; j < nk; ++j) {
      const int t = j / (th * tw), h = j / tw % th, w = j % tw;
      vbs[j] = std::min(4, lt - 4 * t) * std::min(4, lh - 4 * h) * std::min(4, lw - 4 * w);
    }
  }
  std::mt19937_64 rng(1234);
  std::vector<std::int32_t> idx(static_cast<std::size_t>(heads) * nk * topk), num(heads * nk, topk), all(nk);
  std::iota(all.begin(), all.end(), 0);
  for (std::int64_t row = 0; row < static_cast<std::int64_t>(heads) * nk; ++row) {
    if (!same || row == 0) {
      std::shuffle(all.begin(), all.end(), rng);
      std::sort(all.begin(), all.begin() + topk);
    }
    std::copy(all.begin(), all.begin() + topk, idx.begin() + row * topk);
  }
  double real_bytes = 0.0;  // K and V rows of the blocks' real keys
  for (std::int32_t block : idx) real_bytes += 2.0 * vbs[block] * kDim * 2;

  void* kv = nullptr;
  check(cudaMalloc(&kv, 2 * elems * 2), "cudaMalloc kv");
  check(cudaMemset(kv, 0, 2 * elems * 2), "memset kv");
  ProbeParams params{};
  FwdKernelParams& p = params.p;
  p.q = kv;
  p.k = kv;
  p.v = static_cast<char*>(kv) + elems * 2;
  p.q_stride = p.k_stride = p.v_stride = SeqStrides{elems, seq * kDim, kDim};
  p.q2k_idx = to_device(idx);
  p.q2k_num = to_device(num);
  p.vbs = to_device(vbs);
  p.heads = heads;
  p.kv_group = 1;
  p.num_q_blocks = nk;
  p.max_kv = topk;
  p.block = kTileRows;
  p.walk_sms = sms;
  p.walk_ramp_waves = 8;  // kernel_choice.hpp's kWalkRampWaves
  params.partial = partial == "whole" ? Partial::whole : partial == "rows" ? Partial::rows : Partial::oob;
  bool encoded = encode_fwd_tensor_maps(p, true, 1, heads, seq, seq, kDim, params.maps);
  for (int piece = 0; piece < 3; ++piece)
    encoded = encoded && encode_key_rows(params.k_rows[piece], p.k, heads, seq, 32 >> piece) &&
              encode_key_rows(params.v_rows[piece], p.v, heads, seq, 32 >> piece);
  if (!encoded) {
    std::fprintf(stderr, "tensor maps refused\n");
    return 1;
  }
  std::printf("H%d NK%d topk%d latent %dx%dx%d phase-sms %d partial %s lists %s: real K/V bytes %.2f GB (whole tiles "
              "%.2f)\n",
              heads, nk, topk, lt, lh, lw, sms, argv[8], same ? "same" : "random", real_bytes / 1e9,
              2.0 * idx.size() * kTileRows * kDim * 2 / 1e9);
  int sm_count = 0;
  check(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0), "SM count");
  // Each shape of C CTAs an SM and S stages, for one walk (its type in `walk`); `bytes`: the real K/V bytes it requests.
  const auto sweep = [&](auto walk, const char* name, auto grid_of, double bytes, bool all_ctas) {
    using Walk = typename decltype(walk)::type;
    for (int ctas : {1, 2, 3, 4, 6}) {
      if (!all_ctas && ctas == 1) continue;
      params.ctas_per_sm = ctas;
      const dim3 grid = grid_of(ctas);
      const auto report = [&](int stages, double ms) {
        if (ms < 0) return;
        std::printf("  %-10s %d CTAs/SM x %d stages (%3d KB in flight an SM): %8.3f ms  %6.2f TB/s\n", name, ctas,
                    stages, ctas * stages * 32, ms, bytes / ms / 1e9);
      };
      report(1, time_ms<1, Walk>(params, grid));
      report(2, time_ms<2, Walk>(params, grid));
      report(3, time_ms<3, Walk>(params, grid));
      report(4, time_ms<4, Walk>(params, grid));
      report(6, time_ms<6, Walk>(params, grid));
    }
  };
  const auto tile_grid = [&](int) { return dim3(static_cast<unsigned>(nk), static_cast<unsigned>(heads)); };
  const auto persistent_grid = [&](int ctas) { return dim3(static_cast<unsigned>(sm_count * ctas)); };
  sweep(std::type_identity<Steps<false>>{}, "tile CTAs", tile_grid, real_bytes, !quick);
  if (!quick) sweep(std::type_identity<Steps<true>>{}, "persistent", persistent_grid, real_bytes, true);
  // The union walks ask for each block their group lists once: their bytes, by the host's count.
  const auto union_bytes = [&](int group) {
    double bytes = 0.0;
    for (int h = 0; h < heads; ++h)
      for (int q0 = 0; q0 < nk; q0 += group) {
        std::vector<std::int32_t> blocks;
        for (int q = q0; q < std::min(nk, q0 + group); ++q) {
          const auto first = idx.begin() + (static_cast<std::int64_t>(h) * nk + q) * topk;
          blocks.insert(blocks.end(), first, first + topk);
        }
        std::sort(blocks.begin(), blocks.end());
        blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
        for (std::int32_t block : blocks) bytes += 2.0 * vbs[block] * kDim * 2;
      }
    return bytes;
  };
  if (groups && params.partial == Partial::whole) {
    for (int group : {2, 4}) {
      const double bytes = union_bytes(group);
      std::printf(" union of %d query tiles' lists: real K/V bytes %.2f GB (%.3f of the tiles' own)\n", group,
                  bytes / 1e9, bytes / real_bytes);
      const auto grid = [&](int) {
        return dim3(static_cast<unsigned>((nk + group - 1) / group), static_cast<unsigned>(heads));
      };
      if (group == 2)
        sweep(std::type_identity<UnionSteps<2>>{}, "union 2", grid, bytes, false);
      else
        sweep(std::type_identity<UnionSteps<4>>{}, "union 4", grid, bytes, false);
    }
  }
  return 0;
}
