// Kernel-level timing of vsa::forward and vsa::backward on the CUDA backend,
// with no Python: random bf16 inputs, random top-k lists, CUDA-event medians.
// The full benchmark with peers is `vsa bench`; this one is for iterating on
// kernels. The backward counts 2.5x the forward's FLOPs (FastVideo's rule).
//
//   vsa_kernel_bench [heads] [num_blocks] [topk] [head_dim] [block] [partial: 0-4] [only] [calls]
//
// partial: 0 every block whole; 1 every fifth block 48 of 64 tokens; 2 the
// Wan 480p latent's tiling (21×30×52 in 4×4×4 tiles: 624 blocks, a quarter
// of them holding 8, 16 or 32 tokens; needs num_blocks 624 and block 64) for
// the keys; 3 the same for the queries too (q_variable_block_sizes), as the
// VSA layer's self-attention passes it; 4 the HunyuanVideo 720p latent's tiling
// (33×45×80: 2,160 blocks, 18.5 % of them holding 4 or 16 tokens) for the keys.
//
// only: 0 times everything; 1 the forward (with and without lse), 2 the
// backward, 3 the deterministic backward alone (so a profiler sees one kind of
// launch), 4 the VSA layer's coarse stage alone (vsa::coarse_stage on float32
// means of the shape a self-attention layer gives it: NQ = NK, these topk and
// block sizes).
//
// calls: calls per timing, issued back to back (default 1: each call timed
// alone, the device waiting for its first launches; more: the host ahead, as
// in training and in `vsa bench`).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include <vsa/vsa.hpp>

namespace {

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

// Medians of 50 CUDA-event timings of each run, after 10 warm-up runs of
// each; the runs' timings alternate, so clock drift falls on all of them.
// A timing covers `calls` calls issued back to back (its time / calls): with
// 1 the device waits for the host's launches at each call's start; with more,
// the host runs ahead of the device as in a training loop.
template <class... Runs>
std::array<double, sizeof...(Runs)> medians_ms(int calls, Runs... runs) {
  for (int i = 0; i < 10; ++i) (runs(), ...);
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  std::array<std::vector<float>, sizeof...(Runs)> ms;
  const auto time_one = [&](auto& run, std::vector<float>& samples) {
    float t = 0.0f;
    check(cudaEventRecord(start), "record");
    for (int c = 0; c < calls; ++c) run();
    check(cudaEventRecord(stop), "record");
    check(cudaEventSynchronize(stop), "sync");
    check(cudaEventElapsedTime(&t, start, stop), "elapsed");
    samples.push_back(t / static_cast<float>(calls));
  };
  for (int i = 0; i < 50; ++i) {
    std::size_t r = 0;
    (time_one(runs, ms[r++]), ...);
  }
  std::array<double, sizeof...(Runs)> medians{};
  for (std::size_t r = 0; r < ms.size(); ++r) {
    std::sort(ms[r].begin(), ms[r].end());
    medians[r] = ms[r][ms[r].size() / 2];
  }
  return medians;
}

template <class Run>
double median_ms(int calls, Run run) {
  return medians_ms(calls, run)[0];
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Standard normal bf16 values, the i-th drawn from a hash of (seed, i) by Box-Muller, on every
// core: one std::mt19937 took ~10 s for the 10^8 values of a large case, most of each run of
// this tool, while the timed launches take under a second.
std::vector<__nv_bfloat16> normal_bf16(std::size_t count, std::uint64_t seed) {
  std::vector<__nv_bfloat16> values(count);
  const std::size_t threads = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t chunk = (count + threads - 1) / threads;
  const auto fill = [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const std::uint64_t bits = splitmix64(seed * 0x2545F4914F6CDD1Dull + i);
      const double u1 = (static_cast<double>(bits >> 40) + 0.5) * 0x1p-24;
      const double u2 = (static_cast<double>(bits & 0xFFFFFFu) + 0.5) * 0x1p-24;
      const double x = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      values[i] = __float2bfloat16(static_cast<float>(x));
    }
  };
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t)
    workers.emplace_back(fill, std::min(count, t * chunk), std::min(count, (t + 1) * chunk));
  for (auto& worker : workers) worker.join();
  return values;
}

std::int64_t arg(int argc, char** argv, int i, std::int64_t fallback) {
  return argc > i ? std::atoll(argv[i]) : fallback;
}

// only = 4: vsa::coarse_stage alone on float32 means of a self-attention layer's shape (NQ = NK),
// with the bench's lists as the outputs it overwrites. Means of 64 standard normal tokens are
// normal with a sixty-fourth of their variance.
int time_coarse_stage(std::int64_t heads, std::int64_t nk, std::int64_t dim, const vsa::TensorRef& idx,
                      const vsa::TensorRef& num, const vsa::TensorRef& vbs, int calls) {
  const std::vector<__nv_bfloat16> draws = normal_bf16(static_cast<std::size_t>(3 * heads * nk * dim), 3);
  std::vector<float> means(draws.size());
  std::transform(draws.begin(), draws.end(), means.begin(), [](__nv_bfloat16 x) { return __bfloat162float(x) / 8.0f; });
  float* d_means = to_device(means);
  float* d_coarse = nullptr;
  check(cudaMalloc(&d_coarse, heads * nk * dim * sizeof(float)), "cudaMalloc coarse");
  const auto mean_ref = [&](float* data) {
    return vsa::TensorRef::contiguous(data, vsa::DType::f32, {1, heads, nk, dim}, vsa::Device::cuda);
  };
  vsa::CoarseStageParams c;
  c.q_mean = mean_ref(d_means);
  c.k_mean = mean_ref(d_means + heads * nk * dim);
  c.v_mean = mean_ref(d_means + 2 * heads * nk * dim);
  c.variable_block_sizes = vbs;
  c.coarse_out = mean_ref(d_coarse);
  c.q2k_idx = idx;
  c.q2k_num = num;
  try {
    const double ms = median_ms(calls, [&] { vsa::coarse_stage(c); });
    std::printf("H%lld NK%lld topk%lld D%lld: coarse stage %.1f us\n", static_cast<long long>(heads),
                static_cast<long long>(nk), static_cast<long long>(idx.shape[3]), static_cast<long long>(dim),
                1e3 * ms);
  } catch (const vsa::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t heads = arg(argc, argv, 1, 12), nk = arg(argc, argv, 2, 624);
  const std::int64_t topk = arg(argc, argv, 3, 63), dim = arg(argc, argv, 4, 128);
  const std::int64_t block = arg(argc, argv, 5, 64);
  const std::int64_t partial = arg(argc, argv, 6, 1);
  const std::int64_t only = arg(argc, argv, 7, 0);
  const int calls = static_cast<int>(std::max<std::int64_t>(1, arg(argc, argv, 8, 1)));
  const std::int64_t seq = nk * block, elems = heads * seq * dim;

  std::mt19937_64 rng(1234);
  std::vector<std::int32_t> idx(heads * nk * topk), num(heads * nk, static_cast<std::int32_t>(topk));
  std::vector<std::int32_t> all(nk);
  std::iota(all.begin(), all.end(), 0);
  for (std::int64_t row = 0; row < heads * nk; ++row) {
    std::shuffle(all.begin(), all.end(), rng);
    std::sort(all.begin(), all.begin() + topk);
    std::copy(all.begin(), all.begin() + topk, idx.begin() + row * topk);
  }
  if (partial < 0 || partial > 4) {
    std::fprintf(stderr, "partial: expected 0 to 4, got %lld\n", static_cast<long long>(partial));
    return 1;
  }
  // Partial blocks: 1, every 5th block holds 48 of 64 tokens; 2 to 4, a latent's tiling.
  std::vector<std::int32_t> vbs(nk, static_cast<std::int32_t>(block));
  if (partial == 1)
    for (std::int64_t j = 4; j < nk; j += 5) vbs[j] = static_cast<std::int32_t>(block * 3 / 4);
  if (partial >= 2) {  // a latent's 4×4×4 tiles, by the library's own tiling (t outermost; edge tiles cut)
    const vsa::LatentShape latent = partial == 4 ? vsa::LatentShape{33, 45, 80} : vsa::LatentShape{21, 30, 52};
    const std::int64_t tiles = vsa::num_tiles(latent, vsa::TileShape{});
    if (nk != tiles || block != 64) {
      std::fprintf(stderr, "partial %lld (a latent's tiling) needs num_blocks %lld and block 64\n",
                   static_cast<long long>(partial), static_cast<long long>(tiles));
      return 1;
    }
    const std::vector<std::int64_t> sizes = vsa::variable_block_sizes(latent, vsa::TileShape{});
    std::transform(sizes.begin(), sizes.end(), vbs.begin(), [](std::int64_t n) { return static_cast<std::int32_t>(n); });
  }

  std::int32_t* d_idx = to_device(idx);
  std::int32_t* d_num = to_device(num);
  std::int32_t* d_vbs = to_device(vbs);
  using vsa::TensorRef;
  const auto cuda = vsa::Device::cuda;
  const TensorRef idx_ref = TensorRef::contiguous(d_idx, vsa::DType::i32, {1, heads, nk, topk}, cuda);
  const TensorRef num_ref = TensorRef::contiguous(d_num, vsa::DType::i32, {1, heads, nk}, cuda);
  const TensorRef vbs_ref = TensorRef::contiguous(d_vbs, vsa::DType::i32, {nk}, cuda);
  if (only == 4) return time_coarse_stage(heads, nk, dim, idx_ref, num_ref, vbs_ref, calls);

  const std::vector<__nv_bfloat16> qkv = normal_bf16(static_cast<std::size_t>(3 * elems), 1);
  __nv_bfloat16* d_qkv = to_device(qkv);
  __nv_bfloat16* d_out = nullptr;
  float* d_lse = nullptr;
  check(cudaMalloc(&d_out, elems * sizeof(__nv_bfloat16)), "cudaMalloc out");
  check(cudaMalloc(&d_lse, heads * seq * sizeof(float)), "cudaMalloc lse");
  const std::vector<__nv_bfloat16> dout = normal_bf16(static_cast<std::size_t>(elems), 2);
  __nv_bfloat16* d_dout = to_device(dout);
  __nv_bfloat16* d_grads = nullptr;
  check(cudaMalloc(&d_grads, 3 * elems * sizeof(__nv_bfloat16)), "cudaMalloc grads");

  vsa::ForwardParams p;
  p.in.q = TensorRef::contiguous(d_qkv, vsa::DType::bf16, {1, heads, seq, dim}, cuda);
  p.in.k = TensorRef::contiguous(d_qkv + elems, vsa::DType::bf16, {1, heads, seq, dim}, cuda);
  p.in.v = TensorRef::contiguous(d_qkv + 2 * elems, vsa::DType::bf16, {1, heads, seq, dim}, cuda);
  p.in.q2k_idx = idx_ref;
  p.in.q2k_num = num_ref;
  p.in.variable_block_sizes = vbs_ref;
  if (partial == 3) p.in.q_variable_block_sizes = p.in.variable_block_sizes;
  p.out = TensorRef::contiguous(d_out, vsa::DType::bf16, {1, heads, seq, dim}, cuda);
  p.lse = TensorRef::contiguous(d_lse, vsa::DType::f32, {1, heads, seq}, cuda);

  vsa::BackwardParams b;
  b.in = p.in;
  b.out = p.out;
  b.lse = p.lse;
  b.dout = TensorRef::contiguous(d_dout, vsa::DType::bf16, {1, heads, seq, dim}, cuda);
  b.dq = TensorRef::contiguous(d_grads, vsa::DType::bf16, {1, heads, seq, dim}, cuda);
  b.dk = TensorRef::contiguous(d_grads + elems, vsa::DType::bf16, {1, heads, seq, dim}, cuda);
  b.dv = TensorRef::contiguous(d_grads + 2 * elems, vsa::DType::bf16, {1, heads, seq, dim}, cuda);

  try {
    b.deterministic = true;  // the workspace of either dq path: the stored-dS path's is the larger
    const std::size_t deterministic_bytes = vsa::backward_workspace_bytes(b);
    b.deterministic = false;
    b.workspace_bytes = std::max(vsa::backward_workspace_bytes(b), deterministic_bytes);
    check(cudaMalloc(&b.workspace, b.workspace_bytes), "cudaMalloc workspace");
    const double flops = 4.0 * static_cast<double>(heads * dim * seq * topk * block);
    std::printf("H%lld NK%lld topk%lld D%lld blk%lld partial%d:", static_cast<long long>(heads),
                static_cast<long long>(nk), static_cast<long long>(topk), static_cast<long long>(dim),
                static_cast<long long>(block), static_cast<int>(partial));
    if (only == 0 || only == 1) {
      // The inference path must never be the slower one (issue 11): with and
      // without lse timed alternately, so clock drift falls on both.
      vsa::ForwardParams no_lse = p;
      no_lse.need_lse = false;
      no_lse.lse = TensorRef{};
      const auto [fwd, fwd_no_lse] = medians_ms(calls, [&] { vsa::forward(p); }, [&] { vsa::forward(no_lse); });
      std::printf(" fwd %.3f ms (%.1f TFLOP/s) fwd without lse %.3f ms", fwd, flops / fwd / 1e9, fwd_no_lse);
    }
    if (only != 1) vsa::forward(p);  // out and lse for the backward
    if (only == 0 || only == 2) {
      const double bwd = median_ms(calls, [&] { vsa::backward(b); });
      std::printf(" bwd %.3f ms (%.1f TFLOP/s effective)", bwd, 2.5 * flops / bwd / 1e9);
    }
    if (only == 0 || only == 3) {
      b.deterministic = true;
      const double bwd = median_ms(calls, [&] { vsa::backward(b); });
      std::printf(" deterministic bwd %.3f ms (%.1f)", bwd, 2.5 * flops / bwd / 1e9);
    }
    std::printf("\n");
  } catch (const vsa::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
