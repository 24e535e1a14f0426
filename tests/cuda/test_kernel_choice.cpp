// The dispatcher's choice of kernel family and its override; no GPU needed.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "cuda/backward/workspace.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/common/walk_start.hpp"
#include "cuda/kernel_choice.hpp"
#include "scoped_env.hpp"
#include "vsa/attention.hpp"
#include "vsa/error.hpp"

namespace vsa::cuda {
namespace {

// Each test starts without VSA_CUDA_KERNEL; the value the process had (say
// sm80, for a run of the whole binary on the portable kernels) comes back after.
class KernelChoice : public ::testing::Test {
 protected:
  static bool built_with_sm90a() { return archs().find("90a") != std::string::npos; }

 private:
  test::ScopedEnv kernel_{"VSA_CUDA_KERNEL", nullptr};
};

TEST_F(KernelChoice, HopperGetsTheHopperKernelWhenBuiltForIt) {
  EXPECT_EQ(kernel_family_for(90), built_with_sm90a() ? KernelFamily::sm90 : KernelFamily::sm80);
}

TEST_F(KernelChoice, OtherArchitecturesGetThePortableKernel) {
  for (int cc : {80, 86, 89, 100, 103, 120}) EXPECT_EQ(kernel_family_for(cc), KernelFamily::sm80) << cc;
}

TEST_F(KernelChoice, OverrideSelectsThePortableKernelOnHopper) {
  setenv("VSA_CUDA_KERNEL", "sm80", 1);
  EXPECT_EQ(kernel_family_for(90), KernelFamily::sm80);
}

TEST_F(KernelChoice, OverrideSelectsEachHopperForwardVersion) {
  for (const KernelFamily version : {KernelFamily::sm90_v1, KernelFamily::sm90_ws}) {
    const std::string name = version == KernelFamily::sm90_v1 ? "sm90v1" : "sm90ws";
    EXPECT_EQ(kernel_family_name(version), name);
    EXPECT_TRUE(is_hopper(version));
    setenv("VSA_CUDA_KERNEL", name.c_str(), 1);
    if (built_with_sm90a())
      EXPECT_EQ(kernel_family_for(90), version) << name;
    else
      EXPECT_THROW(kernel_family_for(90), Error) << name;
    EXPECT_THROW(kernel_family_for(80), Error) << name;
  }
}

TEST_F(KernelChoice, HopperKernelElsewhereIsRefusedWithAReason) {
  setenv("VSA_CUDA_KERNEL", "sm90", 1);
  try {
    kernel_family_for(80);
    FAIL() << "expected vsa::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    EXPECT_NE(std::string(e.what()).find("VSA_CUDA_KERNEL"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("80"), std::string::npos) << e.what();
  }
}

TEST_F(KernelChoice, UnknownOverrideIsAnInvalidArgument) {
  setenv("VSA_CUDA_KERNEL", "sm75", 1);
  try {
    kernel_family_for(90);
    FAIL() << "expected vsa::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("sm75"), std::string::npos) << e.what();
  }
}

// The public query names the kernel dispatch will use for the device; with
// no device it explains instead of answering.
TEST_F(KernelChoice, PublicQueryNamesTheDevicesKernel) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    EXPECT_THROW(vsa::cuda_forward_kernel(0), Error);
    return;
  }
  EXPECT_EQ(vsa::cuda_forward_kernel(0), kernel_family_name(kernel_family_for(device_arch(0))));
  setenv("VSA_CUDA_KERNEL", "sm80", 1);
  EXPECT_EQ(vsa::cuda_forward_kernel(0), "sm80");
}

// What a build carries for a device, from its arch list as CMake names it: machine code for NN
// runs on NN and its major's later minors, for NNa on NN only; PTX on NN and every later device.
TEST(ArchInBuild, MachineCodeByMajorArchSpecificOnlyThereAndPtxOnward) {
  const std::string standard = "80-real,89-real,90a-real,100a-real,103a-real,120-real,120-virtual";
  for (int cc : {80, 86, 87, 89, 90, 100, 103, 120, 121, 130}) EXPECT_TRUE(arch_in_build(cc, standard)) << cc;
  for (int cc : {75, 101, 110}) EXPECT_FALSE(arch_in_build(cc, standard)) << cc;
  // The gpu preset's build: Hopper only, so an A100 or an L40S has no kernel.
  EXPECT_TRUE(arch_in_build(90, "90a-real"));
  for (int cc : {80, 89, 100, 120}) EXPECT_FALSE(arch_in_build(cc, "90a-real")) << cc;
  EXPECT_FALSE(arch_in_build(90, "80-real"));
  EXPECT_TRUE(arch_in_build(90, "80-virtual"));
  EXPECT_TRUE(arch_in_build(90, "80"));  // CMake's plain NN: machine code and PTX
  EXPECT_TRUE(arch_in_build(86, "80;90a"));
  EXPECT_FALSE(arch_in_build(80, ""));
}

// A descriptor of a CUDA tensor of `shape` over 256 bytes no call reads: for support checks that
// answer before any device is asked.
TensorRef cuda_tensor(DType dtype, std::initializer_list<std::int64_t> shape, int device_index = 0) {
  alignas(256) static unsigned char no_data[256] = {};
  return TensorRef::contiguous(no_data, dtype, shape, Device::cuda, device_index);
}

// A problem the CUDA backend takes, on `device_index`, but for the device itself.
AttentionInputs small_cuda_problem(int device_index) {
  AttentionInputs in;
  in.q = in.k = in.v = cuda_tensor(DType::bf16, {1, 1, 64, 64}, device_index);
  in.q2k_idx = cuda_tensor(DType::i32, {1, 1, 1, 1}, device_index);
  in.q2k_num = cuda_tensor(DType::i32, {1, 1, 1}, device_index);
  in.variable_block_sizes = cuda_tensor(DType::i32, {1}, device_index);
  return in;
}

// supported() answers, never throws: a device index past what the backend keeps per device
// (64), or a device that cannot be asked (no driver, as on CI), is a no with the reason. It threw
// the device query's error instead.
TEST(CudaSupport, ADeviceThatCannotBeAskedIsANoNotAnError) {
  const Support past_the_caches = vsa::supported(small_cuda_problem(64));
  EXPECT_FALSE(past_the_caches.ok);
  EXPECT_NE(past_the_caches.reason.find("device index"), std::string::npos) << past_the_caches.reason;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    const Support no_device = vsa::supported(small_cuda_problem(0));
    EXPECT_FALSE(no_device.ok);
    EXPECT_FALSE(no_device.reason.empty());
  }
}

// The kernels' grids hold at most 65535 (batch, head) pairs: a call with more is unsupported, and
// says so before any device is asked (no GPU needed), where the launch failed or the backward
// stopped half-way.
TEST(CudaSupport, MoreBatchHeadPairsThanAGridExtentAreUnsupported) {
  AttentionInputs in;
  in.q = cuda_tensor(DType::bf16, {1, kMaxBatchHeads + 1, 64, 64});
  in.k = in.v = cuda_tensor(DType::bf16, {1, 1, 64, 64});
  in.q2k_idx = cuda_tensor(DType::i32, {1, kMaxBatchHeads + 1, 1, 1});
  in.q2k_num = cuda_tensor(DType::i32, {1, kMaxBatchHeads + 1, 1});
  in.variable_block_sizes = cuda_tensor(DType::i32, {1});
  const Support support = vsa::supported(in);
  EXPECT_FALSE(support.ok);
  EXPECT_NE(support.reason.find("(batch, head) pairs"), std::string::npos) << support.reason;
}

// A list capacity (max_kv) past 2^30 is unsupported, also before any device is asked: the kernels
// narrowed it to int32, so 2^31 became negative and every list after the first was read from
// before q2k_idx (one of [1, 1, 2, 2^31] int32 lists: 17 GB, an out-of-bounds read 8 GB before it).
TEST(CudaSupport, ListsPast2To30EntriesAreUnsupported) {
  AttentionInputs in;
  in.q = in.k = in.v = cuda_tensor(DType::bf16, {1, 1, 128, 64});
  in.q2k_num = cuda_tensor(DType::i32, {1, 1, 2});
  in.variable_block_sizes = cuda_tensor(DType::i32, {2});
  for (const std::int64_t max_kv : {kMaxListCapacity + 1, std::int64_t{1} << 31}) {
    in.q2k_idx = cuda_tensor(DType::i32, {1, 1, 2, max_kv});
    const Support support = vsa::supported(in);
    EXPECT_FALSE(support.ok) << max_kv;
    EXPECT_NE(support.reason.find("max_kv"), std::string::npos) << support.reason;
  }
}

// Hopper: dS stored at head dim 128 always, at 64 when deterministic; portable: reductions
// unless deterministic.
TEST(DqMethod, EachFamilyAndHeadDim) {
  const test::ScopedEnv dq("VSA_CUDA_DQ", nullptr);
  for (const int d : {64, 128}) {
    EXPECT_EQ(dq_method_for(KernelFamily::sm80, false, d), DqMethod::atomic) << d;
    EXPECT_EQ(dq_method_for(KernelFamily::sm80, true, d), DqMethod::stored_ds) << d;
    for (const KernelFamily family : {KernelFamily::sm90, KernelFamily::sm90_ws, KernelFamily::sm90_v1}) {
      EXPECT_EQ(dq_method_for(family, true, d), DqMethod::stored_ds) << kernel_family_name(family) << d;
      EXPECT_EQ(dq_method_for(family, false, d), d == 128 ? DqMethod::stored_ds : DqMethod::atomic)
          << kernel_family_name(family) << d;
    }
  }
}

// VSA_CUDA_DQ picks the Hopper kernels' path where determinism is not asked for.
TEST(DqMethod, OverrideFromTheEnvironment) {
  for (const int d : {64, 128}) {
    {
      const test::ScopedEnv dq("VSA_CUDA_DQ", "atomic");
      EXPECT_EQ(dq_method_for(KernelFamily::sm90, false, d), DqMethod::atomic) << d;
      EXPECT_EQ(dq_method_for(KernelFamily::sm90, true, d), DqMethod::stored_ds) << d;
      EXPECT_EQ(dq_method_for(KernelFamily::sm80, false, d), DqMethod::atomic) << d;
      EXPECT_EQ(dq_method_for(KernelFamily::sm80, true, d), DqMethod::stored_ds) << d;
    }
    const test::ScopedEnv dq("VSA_CUDA_DQ", "stored");
    EXPECT_EQ(dq_method_for(KernelFamily::sm90, false, d), DqMethod::stored_ds) << d;
    EXPECT_EQ(dq_method_for(KernelFamily::sm80, false, d), DqMethod::stored_ds) << d;
  }
  const test::ScopedEnv dq("VSA_CUDA_DQ", "fast");
  try {
    dq_method_for(KernelFamily::sm90, false, 128);
    FAIL() << "accepted VSA_CUDA_DQ=fast";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_EQ(e.argument(), "VSA_CUDA_DQ") << e.what();
  }
}

TEST(DqMethod, StoredDsCapFromTheEnvironment) {
  {
    const test::ScopedEnv cap("VSA_CUDA_DS_WORKSPACE_MB", nullptr);
    EXPECT_EQ(stored_ds_cap_bytes(), std::size_t{4096} << 20);
  }
  {
    const test::ScopedEnv cap("VSA_CUDA_DS_WORKSPACE_MB", "3");
    EXPECT_EQ(stored_ds_cap_bytes(), std::size_t{3} << 20);
  }
  // " -1" and "+3" (strtoull skips spaces and takes a sign), and counts whose bytes wrap size_t
  // (2^44 MB is 2^64 bytes: a cap of 0) or past unsigned long long.
  for (const char* bad : {"0", "-2", "2GB", "x", " -1", "+3", " 3", "17592186044416", "99999999999999999999999"}) {
    const test::ScopedEnv cap("VSA_CUDA_DS_WORKSPACE_MB", bad);
    try {
      stored_ds_cap_bytes();
      FAIL() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "VSA_CUDA_DS_WORKSPACE_MB") << e.what();
    }
  }
}

// Forward v2's phased list walks (list_walk.cuh): by default where a (batch, kv head)'s K and V
// are larger than half of L2 and the launch is at least 8 resident waves, by all the SMs, the
// phase growing over the first kWalkRampWaves waves.
void expect_phase(const WalkPhase& got, int sms, int ramp_waves) {
  EXPECT_EQ(got.sms, sms);
  EXPECT_EQ(got.ramp_waves, ramp_waves);
}

TEST(WalkPhase, DefaultPhasesLaunchesOfSeveralWavesOverLargeHeads) {
  const test::ScopedEnv phase("VSA_CUDA_WALK_PHASE", nullptr);
  const std::size_t l2 = std::size_t{50} << 20, hunyuan = std::size_t{69} << 20;
  expect_phase(walk_phase_for(hunyuan, l2, 132, 98), 132, kWalkRampWaves);  // HunyuanVideo 720p
  expect_phase(walk_phase_for(l2 / 2 + 1, l2, 132, 8), 132, kWalkRampWaves);
  expect_phase(walk_phase_for(l2 / 2, l2, 132, 98), 0, 0);
  expect_phase(walk_phase_for(hunyuan, l2, 132, 7), 0, 0);
  expect_phase(walk_phase_for(hunyuan, l2, 132, 4), 0, 0);                 // its heads one by one
  expect_phase(walk_phase_for(std::size_t{10} << 20, l2, 132, 14), 0, 0);  // Wan 480p
}

TEST(WalkPhase, OverrideFromTheEnvironment) {
  const std::size_t l2 = std::size_t{50} << 20, small = 1, large = std::size_t{1} << 30;
  {
    const test::ScopedEnv phase("VSA_CUDA_WALK_PHASE", "off");
    expect_phase(walk_phase_for(large, l2, 132, 100), 0, 0);
  }
  {
    const test::ScopedEnv phase("VSA_CUDA_WALK_PHASE", "on");
    expect_phase(walk_phase_for(small, l2, 132, 0), 132, kWalkRampWaves);
  }
  {
    const test::ScopedEnv phase("VSA_CUDA_WALK_PHASE", "3");  // the whole phase from the first CTA
    expect_phase(walk_phase_for(small, l2, 132, 0), 3, 0);
    expect_phase(walk_phase_for(large, l2, 132, 100), 3, 0);
  }
  for (const char* bad : {"0", "-1", "yes", "2x", "5000", " 3", "+3"}) {
    const test::ScopedEnv phase("VSA_CUDA_WALK_PHASE", bad);
    try {
      walk_phase_for(small, l2, 132, 100);
      FAIL() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
      EXPECT_EQ(e.argument(), "VSA_CUDA_WALK_PHASE") << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

// walk_start (walk_start.hpp), the function the kernel runs: every start is a list entry; the
// first wave walks in list order; a CTA's phase grows with its wave up to the ramp's end, and
// from there is its place's share of the list, (cta mod period) · count / period.
TEST(WalkPhase, StartGrowsOverTheFirstWavesAndStaysInTheList) {
  for (const int period : {1, 4, 528})
    for (const int count : {1, 2, 7, 216, 2160})
      for (const int ramp : {0, 1, 8})
        for (int place = 0; place < period; place += std::max(1, period / 17)) {
          const std::int64_t whole = static_cast<std::int64_t>(place) * count / period;
          int before = 0;
          for (std::int64_t wave = 0; wave <= ramp + 2; ++wave) {
            const int start = walk_start(wave * period + place, period, ramp, count);
            SCOPED_TRACE("period " + std::to_string(period) + ", count " + std::to_string(count) + ", ramp " +
                         std::to_string(ramp) + ", place " + std::to_string(place) + ", wave " +
                         std::to_string(wave));
            ASSERT_GE(start, 0);
            ASSERT_LT(start, count);
            if (wave == 0 && ramp > 0) {
              EXPECT_EQ(start, 0);
            }
            if (wave >= ramp) {
              EXPECT_EQ(start, whole);
            }
            EXPECT_GE(start, before);
            before = start;
          }
        }
  // Halfway through an 8-wave ramp, the last place of a wave takes about half its share.
  EXPECT_EQ(walk_start(4 * 528 + 527, 528, 8, 2160), 2155 * 4 / 8);
  EXPECT_EQ(walk_start(123, 0, 8, 2160), 0);  // period 0: list order
  EXPECT_EQ(walk_start(123, 4, 8, 0), 0);     // an empty list
}

// Wan 480p: 12 units (B1, 12 kv heads) of 624 · 63 tiles (322 MB) each.
TEST(DqMethod, StoredDsGroupsFitTheCap) {
  ProblemShape s{};
  s.batch = 1;
  s.heads = s.kv_heads = 12;
  s.block = 64;
  s.num_q_blocks = s.num_kv_blocks = 624;
  s.max_kv = 63;
  const std::int64_t unit_bytes = 624 * 63 * static_cast<std::int64_t>(kDsTileBytes);
  const DsGroups all = DsGroups::plan(s, std::size_t{4096} << 20);
  EXPECT_EQ(all.units, 12);
  EXPECT_EQ(all.units_per_group, 12);
  EXPECT_EQ(all.groups(), 1);
  const DsGroups five = DsGroups::plan(s, 5 * unit_bytes + 1);
  EXPECT_EQ(five.units_per_group, 5);
  EXPECT_EQ(five.groups(), 3);
  EXPECT_EQ(DsGroups::plan(s, 1).units_per_group, 1);  // a group holds at least one unit
  s.block = 128;  // four tiles per pair of blocks; two query heads per kv head
  s.kv_heads = 6;
  const DsGroups blk128 = DsGroups::plan(s, std::size_t{4096} << 20);
  EXPECT_EQ(blk128.tiles_per_unit, 2 * 624 * 63 * 4);
  EXPECT_EQ(blk128.units_per_group, (std::int64_t{4096} << 20) / (blk128.tiles_per_unit * static_cast<std::int64_t>(kDsTileBytes)));
}

// The backward's KV->Q lists index their entries in int32 (workspace.hpp, ListChunks): a call
// whose q2k capacity fits 2^31 - 1 is one chunk, as before; a larger one runs in chunks of whole
// batches, or of kv heads of one batch, each below the limit; a (batch, kv head) that alone
// holds more is refused before any workspace is asked for.
TEST(BackwardLists, ChunksKeepEachListIndexBelow2To31) {
  ProblemShape s{};
  s.batch = 8;  // HunyuanVideo 720p: 1875 blocks of 64 tokens, top-k 192
  s.heads = s.kv_heads = 24;
  s.block = 64;
  s.num_q_blocks = s.num_kv_blocks = 1875;
  s.max_kv = 192;
  const ListChunks whole = ListChunks::plan(s, kMaxListEntries);
  EXPECT_EQ(whole.batches_per_chunk, 8);
  EXPECT_EQ(whole.kv_heads_per_chunk, 24);
  // Every block listed (max_kv = NK): 675M entries, still one chunk.
  s.max_kv = 1875;
  EXPECT_EQ(ListChunks::plan(s, kMaxListEntries).units_per_chunk(), 8 * 24);
  // 3346 blocks, all listed: 2.15e9 entries, past 2^31 - 1. One batch holds 24 · 3346² = 268.7M,
  // so chunks of 7 batches (1.88e9).
  s.num_q_blocks = s.num_kv_blocks = s.max_kv = 3346;
  const ListChunks batches = ListChunks::plan(s, kMaxListEntries);
  EXPECT_EQ(batches.kv_heads_per_chunk, 24);
  EXPECT_EQ(batches.batches_per_chunk, 7);
  EXPECT_LE(batches.units_per_chunk() * s.num_q_blocks * s.max_kv, kMaxListEntries);
  // One batch too large: kv heads of one batch (GQA: 4 query heads per kv head).
  s.batch = 2;
  s.heads = 24;
  s.kv_heads = 6;
  s.num_q_blocks = s.num_kv_blocks = s.max_kv = 12000;
  const ListChunks heads = ListChunks::plan(s, kMaxListEntries);
  EXPECT_EQ(heads.batches_per_chunk, 1);
  EXPECT_EQ(heads.kv_heads_per_chunk, kMaxListEntries / (4 * 12000 * 12000));
  // A single (batch, kv head) past the limit: unsupported, naming q2k_idx.
  s.kv_heads = 1;
  try {
    ListChunks::plan(s, kMaxListEntries);
    ADD_FAILURE() << "no vsa::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    EXPECT_NE(std::string(e.what()).find("q2k_idx"), std::string::npos) << e.what();
  }
  // The workspace's list regions hold one chunk's lists.
  s.kv_heads = 6;
  const test::ScopedEnv dq("VSA_CUDA_DQ", nullptr);
  const BwdWorkspace ws = BwdWorkspace::layout(s, DqMethod::atomic);
  EXPECT_EQ(ws.order - ws.blocks,
            (static_cast<std::size_t>(heads.units_per_chunk() * 4 * 12000 * 12000) * sizeof(int) + 255) / 256 * 256);
}

// VSA_CUDA_LIST_ENTRIES lowers the limit (to run small problems in chunks) and is checked.
TEST(BackwardLists, EntriesCapOverride) {
  {
    const test::ScopedEnv cap("VSA_CUDA_LIST_ENTRIES", nullptr);
    EXPECT_EQ(list_entries_cap(), kMaxListEntries);
  }
  {
    const test::ScopedEnv cap("VSA_CUDA_LIST_ENTRIES", "4096");
    EXPECT_EQ(list_entries_cap(), 4096);
  }
  for (const char* bad : {"0", "-1", " 7", "2147483648", "many"}) {
    const test::ScopedEnv cap("VSA_CUDA_LIST_ENTRIES", bad);
    EXPECT_THROW(list_entries_cap(), Error) << bad;
  }
}

}  // namespace
}  // namespace vsa::cuda
