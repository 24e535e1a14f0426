// Which attention kernels run on a device: the one place that decides, for
// the forward and the backward alike.
//
// sm_90 devices get the Hopper (wgmma) kernels when this build carries sm_90a
// code; every other device, and builds without it, the portable mma.sync
// kernels. The environment variable VSA_CUDA_KERNEL=sm80|sm90|sm90ws|sm90v1
// overrides the choice (to test or benchmark the portable kernels, or another
// version of the Hopper forward, on a Hopper GPU); asking for a kernel the
// device or build cannot run is an error, not a fallback.
//
// Within the Hopper family the forward has three versions: v2 loads tiles
// with TMA, v3 (sm90ws) adds warp specialization and a persistent grid, v1
// loads with cp.async. v2 (v3 for sm90ws) runs whenever the driver can
// describe q, k and v as TMA tensors (decided on the host from their strides,
// with no sync: cuda_backend.cu); v1 runs otherwise, and for sm90v1. v2's
// place is taken, for 128-token blocks at head dim 128, by the kernel whose
// CTA holds a whole query block (sm90/fwd_pair_kernel.cuh).
//
// The backward forms dq one of two ways (docs/kernel-notes.md, "Backward"):
// by fp32 reductions from the key pass (atomic, not bitwise repeatable), or
// by a dQ pass that sums dS·K in list order (bitwise repeatable) from the
// dSᵀ tiles the key pass stored in the workspace (stored_ds; it replaced dQ
// passes that recomputed S and dP, 2026-12-03: portable Wan 480p 8.84 against
// 9.99 ms). The Hopper kernels store dS always at head dim 128, where it is
// the fastest (Wan 480p 5.77 against 6.03 ms atomic, 2026-12-03), and at head
// dim 64 when asked to be deterministic (atomic: 3.73 against 4.04 ms); the
// portable kernels reduce unless asked to be deterministic (atomic: Wan 8.14
// against 8.84 ms). VSA_CUDA_DQ=atomic|stored overrides the choice where
// determinism is not asked for (to compare the two). The stored tiles take
// 8 KB per listed (64-key, 64-row) pair, so the passes run over groups of
// (batch, kv head) whose tiles fit in VSA_CUDA_DS_WORKSPACE_MB megabytes
// (default 4096; any group holds at least one).
//
// Forward v2 phases its list walks (common/list_walk.cuh) where that pays: when one (batch, kv
// head)'s K and V are larger than half of L2 (HunyuanVideo 720p: 69 MB a head) and the launch is
// at least 8 waves of the CTAs resident at once. Each CTA then starts its list where the CTAs
// resident beside it are, so together they read one window of the head instead of all of it
// (HunyuanVideo's 24 heads: 16–20 % faster in vsa_kernel_bench, 11 % in vsa bench, 2026-12-04).
// A launch's first waves start together, in step in list order, so the phase grows over its
// first kWalkRampWaves waves (common/walk_start.hpp); a whole phase from the first wave made 4-
// and 8-wave launches 12 and 5 % slower. VSA_CUDA_WALK_PHASE=off|on|<SMs> overrides the choice
// (on: whatever the slice and the waves; a number: the whole phase from the first CTA, by that
// many SMs' CTAs instead of the device's, so that small test problems get walks that start
// mid-list).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace vsa::cuda {

// Whether a build for `archs` (VSA_CUDA_ARCHS as CMake lists it, e.g. "80-real,90a-real,120-virtual")
// carries code that runs on a device of `compute_capability` (major·10 + minor): machine code for
// NN runs on NN and the later minors of its major, for NNa (or NNf) on NN only (its major's later
// minors), PTX (NN-virtual, or plain NN) on NN and every later device.
bool arch_in_build(int compute_capability, const std::string& archs);

// The CUDA kernels' grids put a (batch, head) pair or the batch on a y or z extent, which CUDA
// caps at 65535: the (batch, head) pairs a call may have.
constexpr std::int64_t kMaxBatchHeads = 65535;

// The kernels hold a list's positions (and its 64-key tiles, two per 128-token block) in int32:
// the list capacity (q2k_idx's last axis, max_kv) a call may have.
constexpr std::int64_t kMaxListCapacity = std::int64_t{1} << 30;

// sm90_ws, sm90_v1: the Hopper kernels with the forward's third or first version.
enum class KernelFamily { sm80, sm90, sm90_ws, sm90_v1 };

inline bool is_hopper(KernelFamily k) { return k != KernelFamily::sm80; }

KernelFamily kernel_family_for(int compute_capability);

const char* kernel_family_name(KernelFamily k);

enum class DqMethod { atomic, stored_ds };

DqMethod dq_method_for(KernelFamily family, bool deterministic, int head_dim);

// The stored-dS path's cap on its dSᵀ tiles' workspace, in bytes.
std::size_t stored_ds_cap_bytes();

// The most KV->Q list entries one chunk of the backward's list and key passes may hold
// (backward/workspace.hpp, ListChunks): 2^31 − 1, what the int32 lists index.
// VSA_CUDA_LIST_ENTRIES=<n> lowers it, so that small test problems run in several chunks.
constexpr std::int64_t kMaxListEntries = 0x7fffffff;
std::int64_t list_entries_cap();

// The waves over which a phase grows, when the rule (or `on`) phases a launch.
constexpr int kWalkRampWaves = 8;

// How forward v2 walks its lists: phased by `sms` SMs' resident CTAs (0: each list in its order),
// the phase growing over the launch's first `ramp_waves` waves (walk_start.hpp).
struct WalkPhase {
  int sms, ramp_waves;
};

// The phase on a device of `sm_count` SMs and `l2_bytes` of L2, for one (batch, kv head)'s
// `slice_bytes` of K and V and a launch of `waves` times the CTAs resident at once.
WalkPhase walk_phase_for(std::size_t slice_bytes, std::size_t l2_bytes, int sm_count, std::int64_t waves);

}  // namespace vsa::cuda
