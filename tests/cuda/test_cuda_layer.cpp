// The VSA layer's CUDA stages against the CPU backend on the same inputs:
// block means, their gradient and the coarse stage's block lists must be
// bit-identical (docs/layer.md, "Precision"); the coarse output, the gate
// combine and its gradient agree to float32 rounding, the coarse stage's
// gradients to TF32's; topk_to_index sorts
// and pack_varlen_index moves lists exactly as on the CPU. Skipped when the
// machine has no CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "device_buffer.hpp"
#include "scoped_env.hpp"
#include "support/layer_problem.hpp"

namespace vsa::test {
namespace {

// Mirrors `tensors` on the GPU, runs `call` on the device refs (same order)
// and copies every mirror back into its host tensor.
template <class Call>
void on_device(const std::vector<HostTensor*>& tensors, Call&& call) {
  std::vector<std::unique_ptr<DeviceMirror>> mirrors;
  std::vector<TensorRef> refs;
  for (HostTensor* t : tensors) {
    mirrors.push_back(std::make_unique<DeviceMirror>(*t));
    refs.push_back(mirrors.back()->ref());
  }
  call(refs);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (const auto& m : mirrors) m->copy_back();
}

void expect_identical(const HostTensor& gpu, const HostTensor& cpu, const char* what) {
  ASSERT_EQ(gpu.numel(), cpu.numel());
  const bool ints = cpu.dtype() == DType::i32 || cpu.dtype() == DType::i64;
  for (std::int64_t i = 0; i < cpu.numel(); ++i) {
    if (ints)
      ASSERT_EQ(gpu.get_int(i), cpu.get_int(i)) << what << " differs at flat " << i;
    else
      ASSERT_EQ(gpu.get(i), cpu.get(i)) << what << " differs at flat " << i;
  }
}

double relative_difference(const HostTensor& gpu, const HostTensor& cpu) {
  std::vector<double> a, b;
  for (std::int64_t i = 0; i < cpu.numel(); ++i) {
    a.push_back(gpu.get(i));
    b.push_back(cpu.get(i));
  }
  return relative_error(a, b);
}

// ---- block means ---------------------------------------------------------------------------------

class CudaBlockMean : public ::testing::TestWithParam<BlockCase> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaBlockMean, MeansAndGradientBitIdenticalToCpu) {
  const auto [dtype, layout, block, dim] = GetParam();
  std::mt19937_64 rng(next_seed());
  const std::int64_t blocks = 7;
  const SequenceShape shape{2, 3, blocks * block, dim, layout};
  HostTensor x = sequence_tensor(dtype, shape);
  x.fill_random(rng);
  HostTensor valid = int_vector(DType::i32, mixed_counts(rng, blocks, block));
  HostTensor cpu_mean(DType::f32, {shape.batch, shape.heads, blocks, dim});
  cpu_mean.poison();
  HostTensor gpu_mean = cpu_mean;
  block_mean({x.ref(), valid.ref(), cpu_mean.ref(), layout, nullptr});
  on_device({&x, &valid, &gpu_mean}, [&](const std::vector<TensorRef>& r) { block_mean({r[0], r[1], r[2], layout, nullptr}); });
  EXPECT_TRUE(gpu_mean.written_exactly_view());
  expect_identical(gpu_mean, cpu_mean, "mean");

  const HostTensor dmean = random_f32(rng, {shape.batch, shape.heads, blocks, dim});
  HostTensor cpu_dx = sequence_tensor(dtype, shape);
  cpu_dx.poison();
  HostTensor gpu_dx = cpu_dx, gpu_dmean = dmean;
  block_mean_backward({dmean.ref(), valid.ref(), cpu_dx.ref(), layout, nullptr});
  on_device({&gpu_dmean, &valid, &gpu_dx},
            [&](const std::vector<TensorRef>& r) { block_mean_backward({r[0], r[1], r[2], layout, nullptr}); });
  EXPECT_TRUE(gpu_dx.written_exactly_view());
  expect_identical(gpu_dx, cpu_dx, "dx");
}

TEST_P(CudaBlockMean, ThreeInOneLaunchBitIdenticalToCpu) {
  const auto [dtype, layout, block, dim] = GetParam();
  std::mt19937_64 rng(next_seed());
  MeansProblem p(rng, dtype, layout, block, dim, 5);
  std::vector<HostTensor> got = p.poisoned_means(), want = p.poisoned_means();
  const BlockMeansParams each = block_means_params(p.refs(want), layout);
  for (const BlockMeanParams* part : {&each.q, &each.k, &each.v}) block_mean(*part);
  on_device(p.tensors(got), [&](const std::vector<TensorRef>& r) { block_means(block_means_params(r, layout)); });
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(got[i].written_exactly_view()) << "part " << i;
    expect_identical(got[i], want[i], "mean");
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaBlockMean,
                         ::testing::Combine(::testing::Values(DType::bf16, DType::f16),
                                            ::testing::Values(Layout::bhsd, Layout::bshd),
                                            ::testing::Values(64, 128), ::testing::Values(64, 128)),
                         block_case_name);

// ---- coarse stage --------------------------------------------------------------------------------

struct CoarseCase {
  std::string name;
  std::int64_t batch, heads, kv_heads, nq, nk, dim, topk;
  DType index_dtype = DType::i32;
  enum class Blocks { mixed, all_live, none_live } blocks = Blocks::mixed;
  bool ties = false;  // every KV head's blocks share one mean, except each fifth, doubled
  const char* rows = nullptr;  // VSA_COARSE_ROWS for this case (query rows per CTA)
  // > 0: block j's key mean is block j % repeat's, so each score repeats ~nk / repeat
  // times in a row (ties inside the last 32 keys the selection ranks).
  std::int64_t repeat = 0;
  // The query and key means scaled by 2^q_shift and 2^k_shift: subnormal or huge means.
  int q_shift = 0, k_shift = 0;
};

void PrintTo(const CoarseCase& c, std::ostream* os) { *os << c.name; }

std::vector<CoarseCase> coarse_cases() {
  using B = CoarseCase::Blocks;
  return {
      {"small", 2, 4, 2, 5, 9, 64, 3},
      {"d128_gqa3", 1, 6, 2, 33, 40, 128, 7, DType::i64},
      {"topk1", 1, 2, 1, 17, 70, 64, 1},
      {"topk_nk", 1, 2, 2, 9, 31, 128, 31},
      {"topk_nk_all_live", 1, 2, 2, 9, 31, 64, 31, DType::i32, B::all_live},
      {"no_live_block", 1, 2, 1, 9, 12, 64, 4, DType::i32, B::none_live},
      {"ties", 2, 2, 1, 20, 50, 64, 12, DType::i32, B::mixed, true},
      // Query rows per CTA on an H200: 32 for the cases above, then 32, 8, 8.
      {"wan_480p_like", 1, 2, 2, 624, 624, 128, 63},
      {"hunyuan_720p_like", 1, 1, 1, 40, 1920, 128, 192},
      {"nk_4000", 1, 1, 1, 20, 4000, 64, 300},
      {"wan_480p_like_rows32", 1, 2, 2, 624, 624, 128, 63, DType::i32, B::mixed, false, "32"},
      {"wan_480p_like_rows16", 1, 2, 2, 624, 624, 128, 63, DType::i32, B::mixed, false, "16"},
      {"wan_480p_like_rows8", 1, 2, 2, 624, 624, 128, 63, DType::i32, B::mixed, false, "8"},
      // 16 and 8 rows: 512- and 1024-key score tiles, 16- and 32-key value tiles, each split
      // between warps (some warps past the last block), with GQA, ties and int64 lists.
      {"d64_gqa2_rows16", 1, 4, 2, 21, 300, 64, 20, DType::i64, B::mixed, false, "16"},
      {"ties_rows16", 1, 2, 1, 20, 531, 128, 40, DType::i32, B::mixed, true, "16"},
      {"d64_ties_rows8", 2, 2, 1, 11, 1030, 64, 100, DType::i64, B::mixed, true, "8"},
      // 27 or 28 copies of each score: the keys left to rank tie among themselves.
      {"repeated_scores", 1, 2, 1, 40, 624, 128, 63, DType::i32, B::mixed, false, nullptr, 23},
      {"repeated_scores_topk_nk", 1, 1, 1, 9, 300, 64, 299, DType::i32, B::all_live, false, nullptr, 11},
      // The selection's search start covers take <= 64 (64 keys at or above the least of the
      // lanes' second-largest): its bound with four keys per lane, and the first take past it.
      {"topk64_four_keys_per_lane", 1, 2, 1, 20, 100, 64, 64},
      {"topk64_ties", 1, 2, 1, 20, 200, 128, 64, DType::i32, B::mixed, true},
      {"topk65", 1, 2, 1, 20, 624, 128, 65},
      // Means in block floating point at the ends of float32's range: subnormal keys (and
      // queries), keys near 2^100 with small queries.
      {"subnormal_means", 1, 2, 1, 40, 300, 128, 30, DType::i32, B::mixed, false, nullptr, 0, -135, -140},
      {"huge_key_means", 1, 2, 2, 17, 200, 64, 20, DType::i32, B::mixed, false, nullptr, 0, -20, 100},
      // Scores of ordinary size from means ~2^±120 (the ranks once left out the query's
      // exponent, so huge key means overflowed them to inf).
      {"huge_keys_tiny_queries", 1, 2, 1, 40, 300, 128, 30, DType::i32, B::mixed, false, nullptr, 0, -120, 120},
      {"huge_queries_tiny_keys", 1, 2, 2, 17, 200, 64, 20, DType::i32, B::mixed, false, nullptr, 0, 120, -120},
  };
}

class CudaCoarseStage : public ::testing::TestWithParam<CoarseCase> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaCoarseStage, ListsBitIdenticalAndOutputCloseToCpu) {
  const CoarseCase& c = GetParam();
  std::mt19937_64 rng(next_seed());
  HostTensor q = random_f32(rng, {c.batch, c.heads, c.nq, c.dim});
  HostTensor k = random_f32(rng, {c.batch, c.kv_heads, c.nk, c.dim});
  HostTensor v = random_f32(rng, {c.batch, c.kv_heads, c.nk, c.dim});
  if (c.ties)
    for (std::int64_t r = 0; r < c.batch * c.kv_heads * c.nk; ++r) {
      const std::int64_t j = r % c.nk;
      for (std::int64_t d = 0; d < c.dim; ++d) k.set(r * c.dim + d, k.get((r - j) * c.dim + d) * (j % 5 == 4 ? 2 : 1));
    }
  if (c.repeat > 0)
    for (std::int64_t r = 0; r < c.batch * c.kv_heads * c.nk; ++r) {
      const std::int64_t j = r % c.nk, source = r - j + j % c.repeat;
      for (std::int64_t d = 0; d < c.dim; ++d) k.set(r * c.dim + d, k.get(source * c.dim + d));
    }
  for (std::int64_t i = 0; i < q.numel(); ++i) q.set(i, std::ldexp(q.get(i), c.q_shift));
  for (std::int64_t i = 0; i < k.numel(); ++i) k.set(i, std::ldexp(k.get(i), c.k_shift));
  std::vector<std::int64_t> sizes = mixed_counts(rng, c.nk, 64);
  for (auto& s : sizes) {
    if (c.blocks == CoarseCase::Blocks::all_live) s = 64;
    if (c.blocks == CoarseCase::Blocks::none_live) s = 0;
  }
  HostTensor vbs = int_vector(DType::i64, sizes);
  HostTensor cpu_out(DType::f32, {c.batch, c.heads, c.nq, c.dim});
  HostTensor cpu_idx(c.index_dtype, {c.batch, c.heads, c.nq, c.topk});
  HostTensor cpu_num(c.index_dtype, {c.batch, c.heads, c.nq});
  for (HostTensor* t : {&cpu_out, &cpu_idx, &cpu_num}) t->poison();
  HostTensor gpu_out = cpu_out, gpu_idx = cpu_idx, gpu_num = cpu_num;

  coarse_stage({q.ref(), k.ref(), v.ref(), vbs.ref(), 0.0f, cpu_out.ref(), cpu_idx.ref(), cpu_num.ref(), nullptr});
  {
    const ScopedEnv rows("VSA_COARSE_ROWS", c.rows);  // null: the default choice
    on_device({&q, &k, &v, &vbs, &gpu_out, &gpu_idx, &gpu_num}, [&](const std::vector<TensorRef>& r) {
      coarse_stage({r[0], r[1], r[2], r[3], 0.0f, r[4], r[5], r[6], nullptr});
    });
  }
  expect_identical(gpu_idx, cpu_idx, "q2k_idx");
  expect_identical(gpu_num, cpu_num, "q2k_num");
  EXPECT_TRUE(gpu_out.written_exactly_view());
  EXPECT_LE(relative_difference(gpu_out, cpu_out), 1e-5);
}

std::string coarse_case_name(const ::testing::TestParamInfo<CoarseCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Cases, CudaCoarseStage, ::testing::ValuesIn(coarse_cases()), coarse_case_name);

// ---- coarse stage backward -----------------------------------------------------------------------

// The CUDA backward (products of TF32-rounded operands, float32 sums: ~4e-4
// relative in a numpy model of it on these inputs, 2.6-4.0e-4 measured on an
// H200) against the CPU's float64 one on the same means and the CPU forward's
// output: rows not a multiple of the warps' 16, keys past the kernels' 64-key
// chunks (an odd number of chunks for the rows kernel's two warps), GQA groups
// summed in dK and dV, dead blocks, no live block, int32 and int64 counts,
// both head dims. A too-small workspace is an error naming `workspace`.
struct CoarseBackwardCase {
  std::string name;
  std::int64_t batch, heads, kv_heads, nq, nk, dim;
  DType count_dtype = DType::i64;
  bool no_live_block = false;
};

void PrintTo(const CoarseBackwardCase& c, std::ostream* os) { *os << c.name; }

class CudaCoarseStageBackward : public ::testing::TestWithParam<CoarseBackwardCase> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaCoarseStageBackward, GradientsCloseToCpu) {
  const CoarseBackwardCase& c = GetParam();
  std::mt19937_64 rng(next_seed());
  HostTensor q = random_f32(rng, {c.batch, c.heads, c.nq, c.dim});
  HostTensor k = random_f32(rng, {c.batch, c.kv_heads, c.nk, c.dim});
  HostTensor v = random_f32(rng, {c.batch, c.kv_heads, c.nk, c.dim});
  HostTensor dcoarse = random_f32(rng, {c.batch, c.heads, c.nq, c.dim});
  std::vector<std::int64_t> sizes = mixed_counts(rng, c.nk, 64);
  if (c.no_live_block) sizes.assign(static_cast<std::size_t>(c.nk), 0);
  HostTensor vbs = int_vector(c.count_dtype, sizes);
  HostTensor coarse(DType::f32, {c.batch, c.heads, c.nq, c.dim});
  HostTensor idx(DType::i32, {c.batch, c.heads, c.nq, 1}), num(DType::i32, {c.batch, c.heads, c.nq});
  coarse_stage({q.ref(), k.ref(), v.ref(), vbs.ref(), 0.0f, coarse.ref(), idx.ref(), num.ref(), nullptr});

  HostTensor cpu_dq(DType::f32, {c.batch, c.heads, c.nq, c.dim});
  HostTensor cpu_dk(DType::f32, {c.batch, c.kv_heads, c.nk, c.dim}), cpu_dv = cpu_dk;
  for (HostTensor* t : {&cpu_dq, &cpu_dk, &cpu_dv}) t->poison();
  HostTensor gpu_dq = cpu_dq, gpu_dk = cpu_dk, gpu_dv = cpu_dv;
  coarse_stage_backward({q.ref(), k.ref(), v.ref(), vbs.ref(), 0.0f, coarse.ref(), dcoarse.ref(), cpu_dq.ref(),
                         cpu_dk.ref(), cpu_dv.ref()});
  on_device({&q, &k, &v, &vbs, &coarse, &dcoarse, &gpu_dq, &gpu_dk, &gpu_dv}, [&](const std::vector<TensorRef>& r) {
    CoarseStageBackwardParams p{r[0], r[1], r[2], r[3], 0.0f, r[4], r[5], r[6], r[7], r[8]};
    const std::size_t bytes = coarse_stage_backward_workspace_bytes(p);
    ASSERT_GT(bytes, 0u);
    const DeviceBytes workspace(bytes);
    p.workspace = workspace.data();
    p.workspace_bytes = bytes - 256;
    try {
      coarse_stage_backward(p);
      ADD_FAILURE() << "a workspace smaller than coarse_stage_backward_workspace_bytes was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "workspace") << e.what();
    }
    p.workspace_bytes = bytes;
    coarse_stage_backward(p);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  });
  const std::pair<const HostTensor*, const HostTensor*> pairs[] = {
      {&gpu_dq, &cpu_dq}, {&gpu_dk, &cpu_dk}, {&gpu_dv, &cpu_dv}};
  for (const auto& [gpu, cpu] : pairs) {
    EXPECT_TRUE(gpu->written_exactly_view());
    if (c.no_live_block) {
      expect_identical(*gpu, *cpu, "a gradient with no live block");  // all 0
    } else {
      const double difference = relative_difference(*gpu, *cpu);
      std::cout << "[ diff     ] " << c.name << ": " << difference << "\n";
      EXPECT_LE(difference, 2e-3);
    }
  }
}

std::vector<CoarseBackwardCase> coarse_backward_cases() {
  return {
      {"small_gqa2", 2, 4, 2, 5, 9, 64},
      {"d128_gqa3_i32", 1, 6, 2, 33, 40, 128, DType::i32},
      {"one_key", 1, 2, 1, 7, 1, 64},
      {"keys_past_a_chunk", 1, 2, 2, 17, 70, 128},
      {"no_live_block", 1, 2, 1, 9, 12, 64, DType::i64, true},
      {"wan_480p_like", 1, 2, 2, 624, 624, 128},
      {"gqa4_long_group", 1, 4, 1, 300, 200, 128},
      {"d64_many_keys", 1, 1, 1, 40, 1030, 64, DType::i32},
  };
}

std::string coarse_backward_case_name(const ::testing::TestParamInfo<CoarseBackwardCase>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaCoarseStageBackward, ::testing::ValuesIn(coarse_backward_cases()),
                         coarse_backward_case_name);

// NaN scores rank above +inf on both backends (docs/layer.md): a query row of
// NaN means ties on every live block and takes the lowest ids; a NaN key mean
// is picked by every row where it is live. The lists only: the outputs are NaN.
TEST(CudaCoarseStageNan, NanScoresPickTheSameListsAsTheCpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(next_seed());
  const std::int64_t heads = 2, nq = 37, nk = 150, dim = 64, topk = 9;
  HostTensor q = random_f32(rng, {1, heads, nq, dim});
  HostTensor k = random_f32(rng, {1, 1, nk, dim});
  HostTensor v = random_f32(rng, {1, 1, nk, dim});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::int64_t row : {std::int64_t{3}, nq + 36})  // head 0 row 3, head 1 row 36
    for (std::int64_t d = 0; d < dim; ++d) q.set(row * dim + d, nan);
  for (const std::int64_t block : {std::int64_t{7}, std::int64_t{90}})
    for (std::int64_t d = 0; d < dim; ++d) k.set(block * dim + d, nan);
  std::vector<std::int64_t> sizes = mixed_counts(rng, nk, 64);
  sizes[7] = 64;  // a live NaN block; block 90's size is random (maybe empty)
  HostTensor vbs = int_vector(DType::i32, sizes);
  HostTensor out(DType::f32, {1, heads, nq, dim});
  HostTensor cpu_idx(DType::i32, {1, heads, nq, topk}), cpu_num(DType::i32, {1, heads, nq});
  cpu_idx.poison();
  cpu_num.poison();
  HostTensor gpu_idx = cpu_idx, gpu_num = cpu_num, gpu_out = out;
  coarse_stage({q.ref(), k.ref(), v.ref(), vbs.ref(), 0.1f, out.ref(), cpu_idx.ref(), cpu_num.ref(), nullptr});
  on_device({&q, &k, &v, &vbs, &gpu_out, &gpu_idx, &gpu_num}, [&](const std::vector<TensorRef>& r) {
    coarse_stage({r[0], r[1], r[2], r[3], 0.1f, r[4], r[5], r[6], nullptr});
  });
  expect_identical(gpu_idx, cpu_idx, "q2k_idx");
  expect_identical(gpu_num, cpu_num, "q2k_num");
  // The NaN block 7 is in the list of row 0; the NaN row 3 starts at block 0 (full).
  bool has_7 = false;
  for (std::int64_t e = 0; e < topk; ++e) has_7 = has_7 || cpu_idx.get_int(e) == 7;
  EXPECT_TRUE(has_7);
  EXPECT_EQ(cpu_idx.get_int(3 * topk), 0);
}

// Two host threads launching the coarse stage at two shared-memory sizes on one device (the
// 32-row kernel at 500 and 1200 KV blocks: about 80 and 170 KB): each call's allowance must hold
// until its launch. It was set on every call, so one thread could lower it between the other's
// setting and its launch ("invalid argument"); now it is only ever raised. A race: before that
// change this failed in some runs, not all.
TEST(CudaCoarseStageThreads, TwoSizesFromTwoThreadsOnOneDevice) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const ScopedEnv rows("VSA_COARSE_ROWS", "32");  // one kernel for both sizes
  const auto run = [](std::int64_t nk, std::uint64_t seed, std::string* error) {
    std::mt19937_64 rng(seed);
    HostTensor q = random_f32(rng, {1, 2, 32, 128});
    HostTensor k = random_f32(rng, {1, 1, nk, 128}), v = random_f32(rng, {1, 1, nk, 128});
    HostTensor vbs = int_vector(DType::i32, std::vector<std::int64_t>(static_cast<std::size_t>(nk), 64));
    HostTensor out(DType::f32, {1, 2, 32, 128}), idx(DType::i32, {1, 2, 32, 8}), num(DType::i32, {1, 2, 32});
    on_device({&q, &k, &v, &vbs, &out, &idx, &num}, [&](const std::vector<TensorRef>& r) {
      try {
        for (int call = 0; call < 400; ++call)
          coarse_stage({r[0], r[1], r[2], r[3], 0.0f, r[4], r[5], r[6], nullptr});
      } catch (const Error& e) {
        *error = e.what();
      }
    });
  };
  std::string small_error, large_error;
  std::thread small(run, 500, next_seed(), &small_error), large(run, 1200, next_seed(), &large_error);
  small.join();
  large.join();
  EXPECT_EQ(small_error, "");
  EXPECT_EQ(large_error, "");
}

TEST(CudaCoarseStageLimit, TooManyKvBlocksIsUnsupported) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(next_seed());
  const std::int64_t nk = 60000;  // 8 rows of float32 scores: 1.9 MB of shared memory
  HostTensor q = random_f32(rng, {1, 1, 8, 64}), k = random_f32(rng, {1, 1, nk, 64});
  HostTensor vbs = int_vector(DType::i32, std::vector<std::int64_t>(nk, 64));
  HostTensor out(DType::f32, {1, 1, 8, 64}), idx(DType::i32, {1, 1, 8, 4}), num(DType::i32, {1, 1, 8});
  on_device({&q, &k, &vbs, &out, &idx, &num}, [&](const std::vector<TensorRef>& r) {
    try {
      coarse_stage({r[0], r[1], r[1], r[2], 0.0f, r[3], r[4], r[5], nullptr});
      ADD_FAILURE() << "no error for NK = " << nk;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::unsupported);
      EXPECT_EQ(e.argument(), "k_mean.shape") << e.what();
    }
  });
}

TEST(CudaCoarseStageLimit, UnalignedMeansAreUnsupported) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(next_seed());
  HostTensor q = random_f32(rng, {1, 1, 9, 64}), k = random_f32(rng, {1, 1, 9, 64});
  HostTensor vbs = int_vector(DType::i32, std::vector<std::int64_t>(8, 64));
  HostTensor out(DType::f32, {1, 1, 8, 64}), idx(DType::i32, {1, 1, 8, 4}), num(DType::i32, {1, 1, 8});
  out.poison();
  on_device({&q, &k, &vbs, &out, &idx, &num}, [&](const std::vector<TensorRef>& r) {
    TensorRef shifted_q = r[0], shifted_k = r[1];  // one float past an aligned start: rows 4 bytes off
    shifted_q.data = static_cast<float*>(shifted_q.data) + 1;
    shifted_q.shape = {1, 1, 8, 64};
    shifted_k.shape = {1, 1, 8, 64};
    try {
      coarse_stage({shifted_q, shifted_k, shifted_k, r[2], 0.0f, r[3], r[4], r[5], nullptr});
      ADD_FAILURE() << "no error for an unaligned q_mean";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::unsupported);
      EXPECT_EQ(e.argument(), "q_mean.data") << e.what();
    }
  });
  EXPECT_TRUE(out.untouched());
}

// ---- gate combine --------------------------------------------------------------------------------

class CudaGateCombine : public ::testing::TestWithParam<CombineCase> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaGateCombine, ForwardAndGradientsMatchCpu) {
  const auto [dtype, layout, block] = GetParam();
  std::mt19937_64 rng(next_seed());
  const std::int64_t blocks = 5;
  const SequenceShape shape{2, 3, blocks * block, 128, layout};
  HostTensor fine = sequence_tensor(dtype, shape), gate = sequence_tensor(dtype, shape);
  fine.fill_random(rng);
  gate.fill_random(rng);
  HostTensor coarse = random_f32(rng, {shape.batch, shape.heads, blocks, shape.dim});
  for (const bool gated : {true, false}) {
    HostTensor cpu_out = sequence_tensor(dtype, shape);
    cpu_out.poison();
    HostTensor gpu_out = cpu_out;
    gate_combine({fine.ref(), coarse.ref(), gated ? gate.ref() : TensorRef{}, cpu_out.ref(), layout, nullptr});
    on_device({&fine, &coarse, &gate, &gpu_out}, [&](const std::vector<TensorRef>& r) {
      gate_combine({r[0], r[1], gated ? r[2] : TensorRef{}, r[3], layout, nullptr});
    });
    EXPECT_TRUE(gpu_out.written_exactly_view());
    EXPECT_LE(relative_difference(gpu_out, cpu_out), 1e-2);

    HostTensor cpu_dcoarse(DType::f32, {shape.batch, shape.heads, blocks, shape.dim});
    HostTensor cpu_dgate = sequence_tensor(dtype, shape);
    cpu_dcoarse.poison();
    cpu_dgate.poison();
    HostTensor gpu_dcoarse = cpu_dcoarse, gpu_dgate = cpu_dgate;
    // fine stands in for dout: any q-shaped tensor.
    gate_combine_backward({fine.ref(), coarse.ref(), gated ? gate.ref() : TensorRef{}, cpu_dcoarse.ref(),
                           gated ? cpu_dgate.ref() : TensorRef{}, layout, nullptr});
    on_device({&fine, &coarse, &gate, &gpu_dcoarse, &gpu_dgate}, [&](const std::vector<TensorRef>& r) {
      gate_combine_backward({r[0], r[1], gated ? r[2] : TensorRef{}, r[3], gated ? r[4] : TensorRef{}, layout, nullptr});
    });
    EXPECT_TRUE(gpu_dcoarse.written_exactly_view());
    EXPECT_LE(relative_difference(gpu_dcoarse, cpu_dcoarse), 1e-5);
    if (gated) {
      EXPECT_TRUE(gpu_dgate.written_exactly_view());
      EXPECT_LE(relative_difference(gpu_dgate, cpu_dgate), 1e-2);
    } else {
      EXPECT_TRUE(gpu_dgate.untouched());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaGateCombine,
                         ::testing::Combine(::testing::Values(DType::bf16, DType::f16),
                                            ::testing::Values(Layout::bhsd, Layout::bshd), ::testing::Values(64, 128)),
                         combine_case_name);

// ---- topk_to_index -------------------------------------------------------------------------------

TEST(CudaTopkToIndex, SortsRowsExactlyAsTheCpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(next_seed());
  for (const auto& [k, in_dtype, out_dtype] :
       {std::tuple{1, DType::i32, DType::i32}, std::tuple{7, DType::i64, DType::i32},
        std::tuple{63, DType::i32, DType::i64}, std::tuple{700, DType::i64, DType::i64}}) {
    const std::int64_t rows = 2 * 3 * 5;
    HostTensor topk(in_dtype, {2, 3, 5, k});
    std::uniform_int_distribution<std::int64_t> id(0, 2 * k);  // duplicates included
    for (std::int64_t e = 0; e < topk.numel(); ++e) topk.set_int(e, id(rng));
    HostTensor cpu_idx(out_dtype, {2, 3, 5, k}), cpu_num(out_dtype, {2, 3, 5});
    cpu_idx.poison();
    cpu_num.poison();
    HostTensor gpu_idx = cpu_idx, gpu_num = cpu_num;
    topk_to_index(topk.ref(), cpu_idx.ref(), cpu_num.ref());
    on_device({&topk, &gpu_idx, &gpu_num},
              [&](const std::vector<TensorRef>& r) { topk_to_index(r[0], r[1], r[2]); });
    expect_identical(gpu_idx, cpu_idx, "q2k_idx");
    expect_identical(gpu_num, cpu_num, "q2k_num");
    EXPECT_EQ(gpu_num.get_int(rows - 1), k);
  }
  // In place, as on the CPU.
  HostTensor ids = int_vector(DType::i32, {3, 1, 2, 0, 7, 6, 9, 8});
  HostTensor shaped(DType::i32, {1, 1, 2, 4});
  for (std::int64_t e = 0; e < 8; ++e) shaped.set_int(e, ids.get_int(e));
  HostTensor num(DType::i32, {1, 1, 2});
  on_device({&shaped, &num}, [&](const std::vector<TensorRef>& r) { topk_to_index(r[0], r[0], r[1]); });
  EXPECT_EQ(int_values(shaped), (std::vector<std::int64_t>{0, 1, 2, 3, 6, 7, 8, 9}));
}

// ---- pack_varlen_index ---------------------------------------------------------------------------

TEST(CudaPackVarlenIndex, MovesListsExactlyAsTheCpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(next_seed());
  // Sequence query/KV block counts, an empty sequence and one without queries included.
  const std::vector<std::int64_t> q_blocks{3, 0, 5, 0, 1, 7}, kv_blocks{2, 0, 6, 3, 1, 9};
  std::vector<std::int64_t> cu_q{0}, cu_kv{0};
  for (std::size_t s = 0; s < q_blocks.size(); ++s) {
    cu_q.push_back(cu_q.back() + q_blocks[s]);
    cu_kv.push_back(cu_kv.back() + kv_blocks[s]);
  }
  const std::int64_t b = 2, h = 3, nq = cu_q.back(), max_kv = 5;
  for (const auto& [list_dtype, cu_dtype, out_dtype] :
       {std::tuple{DType::i32, DType::i32, DType::i32}, std::tuple{DType::i64, DType::i32, DType::i64},
        std::tuple{DType::i32, DType::i64, DType::i64}}) {
    HostTensor local(list_dtype, {b, h, nq, max_kv}), num(list_dtype, {b, h, nq});
    for (std::int64_t row = 0; row < b * h * nq; ++row) {
      std::int64_t s = 0;
      while (cu_q[s + 1] <= row % nq) ++s;
      num.set_int(row, std::uniform_int_distribution<std::int64_t>(0, max_kv)(rng));
      for (std::int64_t e = 0; e < max_kv; ++e)
        local.set_int(row * max_kv + e, std::uniform_int_distribution<std::int64_t>(0, kv_blocks[s] - 1)(rng));
    }
    HostTensor cu_q_t = int_vector(cu_dtype, cu_q), cu_kv_t = int_vector(cu_dtype, cu_kv);
    HostTensor cpu_packed(out_dtype, {b, h, nq, max_kv});
    cpu_packed.poison();
    HostTensor gpu_packed = cpu_packed;
    pack_varlen_index(local.ref(), num.ref(), cu_q_t.ref(), cu_kv_t.ref(), cpu_packed.ref());
    on_device({&local, &num, &cu_q_t, &cu_kv_t, &gpu_packed}, [&](const std::vector<TensorRef>& r) {
      pack_varlen_index(r[0], r[1], r[2], r[3], r[4]);
    });
    expect_identical(gpu_packed, cpu_packed, "packed_idx");
    // In place, as on the CPU.
    if (list_dtype == out_dtype) {
      HostTensor in_place = local;
      on_device({&in_place, &num, &cu_q_t, &cu_kv_t}, [&](const std::vector<TensorRef>& r) {
        pack_varlen_index(r[0], r[1], r[2], r[3], r[0]);
      });
      expect_identical(in_place, cpu_packed, "packed_idx in place");
    }
  }
}

}  // namespace
}  // namespace vsa::test
