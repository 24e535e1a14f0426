// The CUDA backward pass against the analytic float64 gradient of the dense
// reference: the shared case matrix of the CPU tests, partial blocks cut at
// every tile boundary, empty rows and unattended blocks, and a random sweep.
// Skipped when the machine has no CUDA device (CI); the GPU script runs it
// for both kernels (the default and VSA_CUDA_KERNEL=sm80).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "attention_cases.hpp"
#include "cuda/backward/workspace.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/kernel_choice.hpp"
#include "device_buffer.hpp"
#include "scoped_env.hpp"
#include "support/mean_grad_addends.hpp"
#include "support/unattended_blocks.hpp"
#include "vsa/metadata.hpp"

namespace vsa::test {
namespace {

// A backward of `problem` on the GPU (dq, dk, dv poisoned first).
DeviceBackward gpu_backward(AttentionProblem& problem, bool deterministic) {
  BackwardParams host = problem.backward_params();
  host.deterministic = deterministic;
  return DeviceBackward(problem, host);
}

void expect_gpu_backward_matches(AttentionProblem& problem, bool deterministic) {
  ASSERT_TRUE(supported(DeviceInputs(problem).inputs()).ok);
  DeviceBackward device = gpu_backward(problem, deterministic);
  device.run();
  problem.expect_backward_matches();
}

// Both ways of computing dq: float atomics from the key pass (the default),
// and the deterministic dQ pass.
const bool kBothDqPaths[] = {false, true};
std::string dq_path_name(bool deterministic) { return deterministic ? "dq_pass" : "dq_atomic"; }
std::string case_and_path_name(const ::testing::TestParamInfo<std::tuple<AttentionCase, bool>>& param) {
  return std::get<0>(param.param).name + "_" + dq_path_name(std::get<1>(param.param));
}
std::string path_name(const ::testing::TestParamInfo<bool>& param) { return dq_path_name(param.param); }

// Kernels of more than 48 KB of dynamic shared memory (the key pass, forward v2 at D = 128) run
// on every device of the process: their allowance is an attribute per device, which was set
// on the first device only (the second failed at launch).
TEST(CudaDevices, ForwardAndBackwardOnEachDeviceInTurn) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) GTEST_SKIP() << "needs two CUDA devices";
  AttentionCase c;
  c.dtype = DType::bf16;
  c.head_dim = 128;
  for (const int device : {0, 1, 0}) {
    SCOPED_TRACE("device " + std::to_string(device));
    ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
    AttentionProblem problem(c, next_seed());
    {
      ForwardParams p = problem.forward_params(true);
      const DeviceInputs inputs(problem);
      const DeviceMirror out(problem.out), lse(problem.lse);
      p.in = inputs.inputs();
      p.out = out.ref();
      p.lse = lse.ref();
      forward(p);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      out.copy_back();
      lse.copy_back();
      problem.expect_forward_matches(true);
    }
    expect_gpu_backward_matches(problem, false);
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

class CudaBackward : public ::testing::TestWithParam<std::tuple<AttentionCase, bool>> {};

TEST_P(CudaBackward, MatchesReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const auto [c, deterministic] = GetParam();
  const std::uint64_t seed = next_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  AttentionProblem problem(on_gpu(c), seed);
  expect_gpu_backward_matches(problem, deterministic);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaBackward,
                         ::testing::Combine(::testing::ValuesIn(attention_cases()), ::testing::ValuesIn(kBothDqPaths)),
                         case_and_path_name);

// The block-mean addends on the device, handed to a backward's params (which must not outlive it).
struct DeviceMeanGradAddends {
  DeviceMirror dq_mean, dk_mean, dv_mean;
  DeviceMeanGradAddends(const MeanGradAddends& add, BackwardParams& params)
      : dq_mean(add.dq_mean), dk_mean(add.dk_mean), dv_mean(add.dv_mean) {
    params.dq_mean = dq_mean.ref();
    params.dk_mean = dk_mean.ref();
    params.dv_mean = dv_mean.ref();
  }
};

// The VSA layer's block-mean gradients fused into the writes of dq, dk and dv
// (BackwardParams::dq_mean, dk_mean, dv_mean), on both dq paths: the float64
// reference plus mean / count on each block's valid rows.
class CudaBackwardMeanGrads : public ::testing::TestWithParam<std::tuple<AttentionCase, bool>> {};

TEST_P(CudaBackwardMeanGrads, AddMeanOverCountToEachValidRow) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const auto [c, deterministic] = GetParam();
  const std::uint64_t seed = next_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  AttentionProblem problem(on_gpu(c), seed);
  std::mt19937_64 rng(seed + 1);
  const MeanGradAddends add = draw_mean_grad_addends(problem, rng, true, true, true);
  DeviceBackward device = gpu_backward(problem, deterministic);
  const DeviceMeanGradAddends on_device(add, device.params);
  device.run();
  problem.expect_backward_matches(add.added);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaBackwardMeanGrads,
                         ::testing::Combine(::testing::ValuesIn(attention_cases()), ::testing::ValuesIn(kBothDqPaths)),
                         case_and_path_name);

// Blocks cut on both sides of every boundary a kernel steps over: the 16-key
// rows of a warp, the 16- and 32-key widths of the Hopper dQ pass's partial
// tiles, the 64-key tiles (blk = 128), the block end; each query block lists
// every KV block.
class CudaBackwardPartialBlocks : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(CudaBackwardPartialBlocks, EveryCutMatchesReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const auto [head_dim, block, deterministic] = GetParam();
  const std::vector<std::int64_t> cuts =
      block == 64 ? std::vector<std::int64_t>{1, 15, 16, 17, 31, 32, 33, 63, 64}
                  : std::vector<std::int64_t>{1, 16, 17, 32, 33, 63, 64, 65, 80, 81, 96, 97, 127, 128};
  const AttentionCase c = partial_blocks_case(head_dim, block, cuts);
  AttentionProblem problem(c, next_seed());
  list_every_block(problem, c, cuts);
  expect_gpu_backward_matches(problem, deterministic);
}

INSTANTIATE_TEST_SUITE_P(DimsAndBlocks, CudaBackwardPartialBlocks,
                         ::testing::Combine(::testing::Values(64, 128), ::testing::Values(64, 128),
                                            ::testing::ValuesIn(kBothDqPaths)));

class CudaBackwardEdges : public ::testing::TestWithParam<bool> {};

TEST_P(CudaBackwardEdges, UnattendedBlocksAndEmptyRowsGetZeroGradients) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  AttentionCase c;
  c.dtype = DType::bf16;
  AttentionProblem problem(c, next_seed());
  set_unattended_blocks_and_empty_rows(problem);
  expect_gpu_backward_matches(problem, GetParam());
  expect_unattended_gradients_zero(problem);
}

// Padding query rows (q_variable_block_sizes, cut at every row boundary of
// the shared cases) get exact zeros in dq on both paths: the dQ pass selects
// them at its write, the key pass adds dS = 0 into the accumulator. Their
// out and lse are NaN and their q and dout garbage (backward_params), so a
// padding row that reached dk or dv would show against the reference.
TEST_P(CudaBackwardEdges, QueryPaddingRowsGetZeroDq) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (Layout layout : {Layout::bhsd, Layout::bshd}) {
    const AttentionCase c = query_padding_case(DType::bf16, layout);
    AttentionProblem problem(c, next_seed());
    expect_gpu_backward_matches(problem, GetParam());
    std::int64_t padding_rows = 0;
    for (std::int64_t h = 0; h < c.heads; ++h)
      for (std::int64_t s = 0; s < c.seq_q(); ++s) {
        if (!problem.padding_row(s)) continue;
        ++padding_rows;
        for (std::int64_t x = 0; x < c.head_dim; ++x) {
          const std::int64_t flat =
              layout == Layout::bhsd ? problem.dq.flat_index(0, h, s, x) : problem.dq.flat_index(0, s, h, x);
          ASSERT_EQ(problem.dq.get(flat), 0.0) << "padding row " << s << " of head " << h;
        }
      }
    EXPECT_GT(padding_rows, 0);
  }
}

// Lists as skewed as real top-k lists (a few KV blocks named by every query block, some more than
// once, others by few): the key pass takes its CTAs' items most-listed first (KvListArgs::order),
// over a batch of two and kv heads of two query heads each.
TEST_P(CudaBackwardEdges, SkewedListsMatchReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  AttentionCase c;
  c.dtype = DType::bf16;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.num_q_blocks = 12;
  c.num_kv_blocks = 8;
  c.max_kv = 6;
  c.duplicates = true;
  AttentionProblem problem(c, next_seed());
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < c.heads; ++h)
      for (std::int64_t i = 0; i < c.num_q_blocks; ++i) {
        std::vector<std::int64_t> list = {0, 5, 0};  // blocks 0 and 5 by everyone, 0 twice
        if ((i + h) % 3 == 0) list.push_back(1 + (i + b) % 4);
        if (h == 3 && i < 4) list.push_back(7);  // one query head of the second kv head
        problem.set_list(b, h, i, list);
      }
  expect_gpu_backward_matches(problem, GetParam());
}

// dk and dv on both paths; dq too on the deterministic one.
TEST_P(CudaBackwardEdges, RepeatableBitForBit) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const bool deterministic = GetParam();
  AttentionCase c;
  c.dtype = DType::bf16;
  c.head_dim = 128;
  c.num_q_blocks = 6;
  c.num_kv_blocks = 6;
  c.max_kv = 6;
  c.heads = 4;
  c.kv_heads = 2;
  c.duplicates = true;
  AttentionProblem problem(c, next_seed());
  DeviceBackward device = gpu_backward(problem, deterministic);
  device.run();
  const HostTensor dq = problem.dq, dk = problem.dk, dv = problem.dv;
  device.run();
  for (std::int64_t e = 0; e < dk.numel(); ++e) {
    ASSERT_EQ(problem.dk.get(e), dk.get(e)) << "dk element " << e;
    ASSERT_EQ(problem.dv.get(e), dv.get(e)) << "dv element " << e;
  }
  if (deterministic) {
    for (std::int64_t e = 0; e < dq.numel(); ++e) ASSERT_EQ(problem.dq.get(e), dq.get(e)) << "dq element " << e;
  }
}

TEST_P(CudaBackwardEdges, TooSmallWorkspaceIsAnErrorAndWritesNothing) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  AttentionCase c;
  c.dtype = DType::bf16;
  AttentionProblem problem(c, next_seed());
  DeviceBackward device = gpu_backward(problem, GetParam());
  const std::size_t needed = backward_workspace_bytes(device.params);
  ASSERT_GT(needed, 0u);
  try {
    device.run(needed - 256);
    FAIL() << "a workspace smaller than backward_workspace_bytes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "workspace") << e.what();
  }
  EXPECT_TRUE(problem.dq.untouched() && problem.dk.untouched() && problem.dv.untouched());
}

INSTANTIATE_TEST_SUITE_P(DqPaths, CudaBackwardEdges, ::testing::ValuesIn(kBothDqPaths), path_name);

// Random problems: shapes, GQA groups, block sizes, head dims, dtypes,
// layouts, list lengths from 0 to NK (capacities past NK, duplicates),
// int32/int64 metadata; both dq paths. VSA_BACKWARD_SWEEP_CASES sets the
// count (default 200).
TEST(CudaBackwardSweep, RandomProblemsMatchReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const char* env = std::getenv("VSA_BACKWARD_SWEEP_CASES");
  const int cases = env != nullptr ? std::atoi(env) : 200;
  std::mt19937_64 rng(next_seed());
  auto pick = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  for (int n = 0; n < cases; ++n) {
    AttentionCase c;
    c.dtype = pick(0, 1) ? DType::bf16 : DType::f16;
    c.head_dim = pick(0, 1) ? 64 : 128;
    c.block = pick(0, 2) ? 64 : 128;
    c.batch = pick(1, 2);
    c.kv_heads = pick(1, 2);
    c.heads = c.kv_heads * pick(1, 3);
    c.num_q_blocks = pick(1, 5);
    c.num_kv_blocks = pick(1, 6);
    c.duplicates = pick(0, 4) == 0;
    c.max_kv = pick(1, c.num_kv_blocks + 2);
    c.layout = pick(0, 1) ? Layout::bhsd : Layout::bshd;
    c.padded_rows = pick(0, 3) == 0;
    c.idx_dtype = pick(0, 1) ? DType::i32 : DType::i64;
    c.num_dtype = pick(0, 1) ? DType::i32 : DType::i64;
    c.vbs_dtype = pick(0, 1) ? DType::i32 : DType::i64;
    c.q_padding = pick(0, 2) == 0;
    const bool deterministic = pick(0, 1) == 1;
    const std::uint64_t seed = next_seed();
    SCOPED_TRACE("sweep case " + std::to_string(n) + ", seed " + std::to_string(seed) + ": B" +
                 std::to_string(c.batch) + " H" + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) +
                 " NQ" + std::to_string(c.num_q_blocks) + " NK" + std::to_string(c.num_kv_blocks) + " blk" +
                 std::to_string(c.block) + " D" + std::to_string(c.head_dim) + " max_kv" +
                 std::to_string(c.max_kv) + (c.q_padding ? " q-padding " : " ") + dq_path_name(deterministic));
    AttentionProblem problem(c, seed);
    expect_gpu_backward_matches(problem, deterministic);
    if (::testing::Test::HasFailure()) return;  // the first failing case says enough
  }
}

// The Hopper kernels' deterministic dq (the stored-dS path) runs its passes over groups of
// (batch, kv head) units whose dSᵀ tiles fit VSA_CUDA_DS_WORKSPACE_MB. Under small caps: one
// unit per group, and three (a group across both batches, then one of a single unit). Each
// unit stores at most 2 MB (64-token blocks) or 4 MB (128-token blocks) of tiles here.
TEST(CudaBackwardStoredDs, GroupsOfUnitsMatchReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const int block : {64, 128}) {
    for (const char* cap_mb : {block == 64 ? "7" : "13", "1"}) {
      SCOPED_TRACE("blk " + std::to_string(block) + ", cap " + cap_mb + " MB");
      AttentionCase c;
      c.dtype = DType::bf16;
      c.block = block;
      c.batch = 2;
      c.heads = 4;
      c.kv_heads = 2;
      c.num_q_blocks = block == 64 ? 16 : 8;
      c.num_kv_blocks = 10;
      c.max_kv = 8;
      c.duplicates = true;
      c.q_padding = true;
      AttentionProblem problem(c, next_seed());
      DeviceBackward device = gpu_backward(problem, true);
      const std::size_t whole = backward_workspace_bytes(device.params);
      const ScopedEnv cap("VSA_CUDA_DS_WORKSPACE_MB", cap_mb);
      const std::size_t capped = backward_workspace_bytes(device.params);
      if (cuda::is_hopper(cuda::kernel_family_for(cuda::device_arch(0)))) {
        EXPECT_LT(capped, whole) << "the cap made no groups";
      }
      device.run();
      problem.expect_backward_matches();
    }
  }
}

// The lists and the key (and dQ) passes over chunks of (batch, kv head) units (backward/
// workspace.hpp, ListChunks), which a call takes only past 2^31 - 1 list entries: here
// VSA_CUDA_LIST_ENTRIES brings the limit down to one unit's lists (chunks of one kv head of one
// batch, or of one batch without GQA groups) and to two units' (whole batches where a batch has
// up to two kv heads), on the case matrix with a second batch and the block-mean addends (whose
// pointers move with the chunk too), both dq paths.
class CudaBackwardListChunks : public ::testing::TestWithParam<std::tuple<AttentionCase, bool>> {};

TEST_P(CudaBackwardListChunks, ChunkedPassesMatchReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const auto [c0, deterministic] = GetParam();
  AttentionCase c = on_gpu(c0);
  c.batch = 2;
  const std::int64_t unit_entries = c.heads / c.kv_heads * c.num_q_blocks * c.max_kv;
  for (const std::int64_t units : {1, 2}) {  // per chunk
    const std::uint64_t seed = next_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(units) + " unit(s) of lists per chunk");
    AttentionProblem problem(c, seed);
    std::mt19937_64 rng(seed + 1);
    const MeanGradAddends add = draw_mean_grad_addends(problem, rng, true, true, true);
    DeviceBackward device = gpu_backward(problem, deterministic);
    const DeviceMeanGradAddends on_device(add, device.params);
    const ScopedEnv cap("VSA_CUDA_LIST_ENTRIES", std::to_string(units * unit_entries).c_str());
    const ProblemShape shape = check_inputs(device.params.in);
    const cuda::ListChunks chunks = cuda::BwdWorkspace::layout(shape, cuda::DqMethod::atomic).chunks;
    EXPECT_EQ(chunks.units_per_chunk(), units < c.kv_heads ? units : units / c.kv_heads * c.kv_heads);
    device.run();
    problem.expect_backward_matches(add.added);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaBackwardListChunks,
                         ::testing::Combine(::testing::ValuesIn(attention_cases()), ::testing::ValuesIn(kBothDqPaths)),
                         case_and_path_name);

// A uniform backward: every block of `blocks` 64-token blocks listed by every query block, q = k
// = 0 (every score 0), v = out = dout = `value` and lse = log2(Skv), so P = 1/Skv everywhere and
// dS = P · (dO·Vᵀ − rowsum(dO ∘ O)) = 0: dq and dk are 0 and dv is Sq/Skv · dO = dO. Returns how
// many elements of each gradient differ from that (dv compared exactly: see the test below), and
// dv's first element.
struct UniformBackwardResult {
  std::int64_t wrong[3];  // dq, dk, dv
  float first_dv;
};

UniformBackwardResult run_uniform_backward(std::int64_t heads, std::int64_t blocks, float value) {
  constexpr std::int64_t kBlock = 64, kDim = 64;
  const std::int64_t seq = blocks * kBlock, elems = heads * seq * kDim;
  const std::size_t seq_bytes = static_cast<std::size_t>(elems) * 2;
  const auto tensor = [](const DeviceBytes& b, DType dtype, std::initializer_list<std::int64_t> shape) {
    return TensorRef::contiguous(b.data(), dtype, shape, Device::cuda, 0);
  };
  const auto bf16_bits = [](float f) {  // exact for the values used here (8 significant bits)
    std::uint32_t word;
    std::memcpy(&word, &f, sizeof(word));
    return static_cast<std::uint16_t>(word >> 16);
  };
  const auto value_of = [](std::uint16_t bits) {
    const std::uint32_t word = static_cast<std::uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &word, sizeof(f));
    return f;
  };
  const DeviceBytes q(seq_bytes), k(seq_bytes), v(seq_bytes), out(seq_bytes), dout(seq_bytes), dq(seq_bytes),
      dk(seq_bytes), dv(seq_bytes);
  for (const DeviceBytes* zero : {&q, &k}) EXPECT_EQ(cudaMemset(zero->data(), 0, seq_bytes), cudaSuccess);
  std::vector<std::uint16_t> host(static_cast<std::size_t>(elems), bf16_bits(value));
  for (const DeviceBytes* same : {&v, &out, &dout})
    EXPECT_EQ(cudaMemcpy(same->data(), host.data(), seq_bytes, cudaMemcpyHostToDevice), cudaSuccess);
  for (const DeviceBytes* grad : {&dq, &dk, &dv}) EXPECT_EQ(cudaMemset(grad->data(), 0xFF, seq_bytes), cudaSuccess);
  const std::vector<float> lse_host(static_cast<std::size_t>(heads * seq), std::log2(static_cast<float>(seq)));
  const std::vector<std::int32_t> vbs_host(static_cast<std::size_t>(blocks), static_cast<std::int32_t>(kBlock));
  const DeviceBytes lse(lse_host.size() * sizeof(float)), vbs(vbs_host.size() * sizeof(std::int32_t));
  EXPECT_EQ(cudaMemcpy(lse.data(), lse_host.data(), lse.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(vbs.data(), vbs_host.data(), vbs.size(), cudaMemcpyHostToDevice), cudaSuccess);
  const DeviceBytes idx(static_cast<std::size_t>(heads * blocks * blocks) * sizeof(std::int32_t));
  const DeviceBytes num(static_cast<std::size_t>(heads * blocks) * sizeof(std::int32_t));
  {  // every block listed, ascending
    const DeviceBytes map(static_cast<std::size_t>(heads * blocks * blocks));
    EXPECT_EQ(cudaMemset(map.data(), 1, map.size()), cudaSuccess);
    vsa::map_to_index(tensor(map, DType::boolean, {1, heads, blocks, blocks}),
                      tensor(idx, DType::i32, {1, heads, blocks, blocks}), tensor(num, DType::i32, {1, heads, blocks}));
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  BackwardParams p;
  p.in.q = tensor(q, DType::bf16, {1, heads, seq, kDim});
  p.in.k = tensor(k, DType::bf16, {1, heads, seq, kDim});
  p.in.v = tensor(v, DType::bf16, {1, heads, seq, kDim});
  p.in.q2k_idx = tensor(idx, DType::i32, {1, heads, blocks, blocks});
  p.in.q2k_num = tensor(num, DType::i32, {1, heads, blocks});
  p.in.variable_block_sizes = tensor(vbs, DType::i32, {blocks});
  p.out = tensor(out, DType::bf16, {1, heads, seq, kDim});
  p.dout = tensor(dout, DType::bf16, {1, heads, seq, kDim});
  p.lse = tensor(lse, DType::f32, {1, heads, seq});
  p.dq = tensor(dq, DType::bf16, {1, heads, seq, kDim});
  p.dk = tensor(dk, DType::bf16, {1, heads, seq, kDim});
  p.dv = tensor(dv, DType::bf16, {1, heads, seq, kDim});
  const DeviceBytes workspace(backward_workspace_bytes(p));
  p.workspace = workspace.data();
  p.workspace_bytes = workspace.size();
  vsa::backward(p);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  UniformBackwardResult result{};
  const DeviceBytes* grads[] = {&dq, &dk, &dv};
  for (int g = 0; g < 3; ++g) {
    EXPECT_EQ(cudaMemcpy(host.data(), grads[g]->data(), seq_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    const float expected = g == 2 ? value : 0.0f;
    for (const std::uint16_t bits : host) result.wrong[g] += value_of(bits) != expected;
    if (g == 2) result.first_dv = value_of(host[0]);
  }
  return result;
}

// Past 2^31 - 1 listed entries: two heads of 32768 blocks of 64 tokens, every block listed by
// every query block (2^31 KV->Q entries; 2^31 is reached, for example, by 8 × 24 heads of 3346
// blocks all listed, or of 6700 blocks at top-k 1670). Before the lists ran in chunks their int32
// offsets wrapped past 2^31: the placement wrote, and the key pass read, out of bounds, and the
// list that straddled the wrap was walked for one query block only. With Skv = 2^21 and every
// value 1, P = 2^-21 exactly and every partial sum of dv is a multiple of 2^-21 below 2, exact in
// float32 however the tensor cores add: dv = 1, dq = dk = 0, bit for bit. (Session 39's version,
// 33024 blocks and values 0.74609375, summed 2.1e6 products of ~3.5e-7 and came out 1.6 % low:
// the tensor cores' float32 sums drop bits below the running sum's last place.) About 26 GB of
// GPU memory and a minute of an H200: it runs only with VSA_CUDA_LARGE_TESTS=1, on the atomic dq
// path (the stored dS tiles, 8 KB a listed pair, would take 17.6 TB).
TEST(CudaBackwardLarge, ListsPast2To31EntriesMatchTheClosedForm) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const char* large = std::getenv("VSA_CUDA_LARGE_TESTS");
  if (large == nullptr || std::string(large) != "1") GTEST_SKIP() << "set VSA_CUDA_LARGE_TESTS=1 to run";
  std::size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  if (free_bytes < (std::size_t{30} << 30)) GTEST_SKIP() << "needs 30 GB of free GPU memory";
  const ScopedEnv atomic("VSA_CUDA_DQ", "atomic");
  const ScopedEnv no_cap("VSA_CUDA_LIST_ENTRIES", nullptr);
  const UniformBackwardResult r = run_uniform_backward(2, 32768, 1.0f);
  EXPECT_EQ(r.wrong[0], 0) << "dq elements not 0";
  EXPECT_EQ(r.wrong[1], 0) << "dk elements not 0";
  EXPECT_EQ(r.wrong[2], 0) << "dv elements not 1; the first is " << r.first_dv;
}

}  // namespace
}  // namespace vsa::test
