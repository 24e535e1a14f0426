// Host side of the CUDA backend: support facts, and the dispatcher that picks
// the forward kernel instantiation for a validated problem (the backward's is
// backward/backward.cu).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_guard.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/kernel_choice.hpp"
#include "cuda/tensor_views.hpp"
#include "cuda/sm80/fwd_launch.hpp"
#include "cuda/sm90/fwd_launch.hpp"

namespace vsa::cuda {
namespace {

// A per-device fact that never changes (compute capability, SM count),
// queried once per device and process and then read without a driver call;
// `cache` is a function-local static of the caller.
using DeviceCache = std::array<std::atomic<int>, 64>;
template <class Query>
int cached_per_device(DeviceCache& cache, int device_index, Query query) {
  if (device_index < 0 || device_index >= static_cast<int>(cache.size()))
    throw Error(ErrorKind::invalid_argument, "q.device", "a CUDA device index in [0, 64)",
                std::to_string(device_index));
  int value = cache[device_index].load(std::memory_order_relaxed);
  if (value == 0) {
    value = query();
    cache[device_index].store(value, std::memory_order_relaxed);
  }
  return value;
}

int device_attribute(cudaDeviceAttr attribute, int device_index, const char* what) {
  int value = 0;
  check_cuda(cudaDeviceGetAttribute(&value, attribute, device_index), what);
  return value;
}

// One device attribute, cached per device (a cache per attribute: one per instantiation).
template <cudaDeviceAttr kAttribute>
int cached_attribute(int device_index, const char* what) {
  static DeviceCache cache{};
  return cached_per_device(cache, device_index, [&] { return device_attribute(kAttribute, device_index, what); });
}

// The persistent forward's grid size, and the list walks' phase (walk_phase below).
int sm_count(int device_index) {
  return cached_attribute<cudaDevAttrMultiProcessorCount>(device_index, "cudaDeviceGetAttribute(multiProcessorCount)");
}

int l2_bytes(int device_index) {
  return cached_attribute<cudaDevAttrL2CacheSize>(device_index, "cudaDeviceGetAttribute(l2CacheSize)");
}

// How forward v2 walks its lists (kernel_choice.hpp): its walks re-read one (batch, kv head)'s K
// and V rows, and it runs a CTA per 64-row query tile.
WalkPhase walk_phase(const ProblemShape& s, DType dtype, int device_index) {
  const std::int64_t slice_bytes = 2 * s.seq_kv * s.head_dim * static_cast<std::int64_t>(dtype_size(dtype));
  const std::int64_t tiles = s.batch * s.heads * s.num_q_blocks * (s.block / 64);
  const int sms = sm_count(device_index);
  return walk_phase_for(static_cast<std::size_t>(slice_bytes), static_cast<std::size_t>(l2_bytes(device_index)), sms,
                        tiles / (static_cast<std::int64_t>(sms) * sm90::kTmaFwdCtasPerSm));
}

// A CTA owns one whole query block (64 or 128 rows).
template <class Elem, int kHeadDim>
void launch_for_block(const FwdKernelParams& kp, const ProblemShape& s, cudaStream_t stream) {
  const int batch = static_cast<int>(s.batch);
  if (s.block == 128)
    sm80::launch_fwd<Elem, kHeadDim, 128>(kp, batch, stream);
  else
    sm80::launch_fwd<Elem, kHeadDim, 64>(kp, batch, stream);
}

// The Hopper forward with TMA loads: for 128-token blocks at D = 128 the
// kernel whose CTA holds a whole block (its two halves share K/V), else v2.
template <class Elem, int kHeadDim>
void launch_hopper_tma(const FwdKernelParams& kp, const sm90::FwdTensorMaps& maps, int batch, cudaStream_t stream) {
  if constexpr (kHeadDim == 128) {
    if (kp.block == 128) return sm90::launch_fwd_pair<Elem, kHeadDim>(kp, maps, batch, stream);
  }
  sm90::launch_fwd_tma<Elem, kHeadDim>(kp, maps, batch, stream);
}

// The Hopper forward: the TMA kernels above, or v3 for sm90ws, when the
// driver can describe q, k and v as TMA tensors and the caller did not ask
// for v1; v1 (cp.async) otherwise.
template <class Elem, int kHeadDim>
void launch_hopper(const FwdKernelParams& kp, const ProblemShape& s, int device_index, cudaStream_t stream,
                   KernelFamily kernel) {
  const int batch = static_cast<int>(s.batch);
  sm90::FwdTensorMaps maps;
  if (kernel != KernelFamily::sm90_v1 &&
      sm90::encode_fwd_tensor_maps(kp, std::is_same_v<Elem, __nv_bfloat16>, batch, static_cast<int>(s.kv_heads),
                                   s.seq_q, s.seq_kv, kHeadDim, maps)) {
    if (kernel == KernelFamily::sm90_ws)
      sm90::launch_fwd_ws<Elem, kHeadDim>(kp, maps, batch, sm_count(device_index), stream);
    else
      launch_hopper_tma<Elem, kHeadDim>(kp, maps, batch, stream);
  } else {
    sm90::launch_fwd<Elem, kHeadDim>(kp, batch, stream);
  }
}

template <class Elem>
void launch_for_dim(const FwdKernelParams& kp, const ProblemShape& s, int device_index, cudaStream_t stream,
                    KernelFamily kernel) {
  if (is_hopper(kernel)) {
    if (s.head_dim == 64)
      launch_hopper<Elem, 64>(kp, s, device_index, stream, kernel);
    else
      launch_hopper<Elem, 128>(kp, s, device_index, stream, kernel);
    return;
  }
  if (s.head_dim == 64)
    launch_for_block<Elem, 64>(kp, s, stream);
  else
    launch_for_block<Elem, 128>(kp, s, stream);
}

// The element strides of an output or addend the epilogue moves in 16-byte
// chunks of rows; refused (`argument`.stride) when its rows are not aligned.
SeqStrides chunked_row_strides(const TensorRef& t, Layout layout, const char* argument) {
  if (!rows_aligned(t, layout))
    throw Error(ErrorKind::unsupported, std::string(argument) + ".stride",
                "16-byte aligned rows (strides multiple of 8)", "unaligned rows");
  return seq_strides(t, layout);
}

}  // namespace

bool compiled() { return true; }
std::string archs() { return VSA_CUDA_ARCHS_STRING; }

int device_arch(int device_index) {
  static DeviceCache cache{};
  return cached_per_device(cache, device_index, [&] {
    return 10 * device_attribute(cudaDevAttrComputeCapabilityMajor, device_index, "cudaDeviceGetAttribute(major)") +
           device_attribute(cudaDevAttrComputeCapabilityMinor, device_index, "cudaDeviceGetAttribute(minor)");
  });
}

namespace {

// Whether this build's code runs on the device (arch_in_build), decided once per device.
bool build_runs_on(int device_index, int compute_capability) {
  static DeviceCache cache{};  // 1: runs, 2: does not (0: not yet decided)
  return cached_per_device(cache, device_index, [&] {
           return compute_capability >= 80 && arch_in_build(compute_capability, archs()) ? 1 : 2;
         }) == 1;
}

}  // namespace

std::string forward_kernel(int device_index) {
  return kernel_family_name(kernel_family_for(device_arch(device_index)));
}

Support supported(const AttentionInputs& in, const ProblemShape& s) {
  if (in.q.dtype != DType::bf16 && in.q.dtype != DType::f16)
    return {false, std::string("the CUDA backend takes bfloat16 or float16 inputs, got ") +
                       dtype_name(in.q.dtype) + " (float32 runs on the CPU backend)"};
  if (s.batch * s.heads > kMaxBatchHeads)
    return {false, "the CUDA kernels take at most " + std::to_string(kMaxBatchHeads) +
                       " (batch, head) pairs (a grid extent), got B·H = " + std::to_string(s.batch * s.heads)};
  if (s.max_kv > kMaxListCapacity)
    return {false, "the CUDA kernels take lists of at most " + std::to_string(kMaxListCapacity) +
                       " entries (q2k_idx's last axis, max_kv: int32 positions), got max_kv = " +
                       std::to_string(s.max_kv)};
  const int cc = device_arch(in.q.device_index);
  if (!build_runs_on(in.q.device_index, cc))
    return {false, "no kernel of this build runs on compute capability " + std::to_string(cc) +
                       " (built for " + archs() + "; sm_80 or newer needed)"};
  if (!rows_aligned(in.q, in.layout) || !rows_aligned(in.k, in.layout) || !rows_aligned(in.v, in.layout))
    return {false, "the CUDA kernel needs 16-byte aligned rows: data pointers aligned to 16 bytes "
                   "and batch/head/sequence strides that are multiples of 8 elements"};
  return {true, ""};
}

void forward(const ForwardParams& p, const ProblemShape& s, float scale) {
  const AttentionInputs& in = p.in;
  const SeqStrides out_stride = chunked_row_strides(p.out, in.layout, "out");
  FwdKernelParams kp{};
  kp.q = in.q.data;
  kp.k = in.k.data;
  kp.v = in.v.data;
  kp.out = p.out.data;
  kp.lse = p.need_lse ? static_cast<float*>(p.lse.data) : nullptr;
  kp.q_stride = seq_strides(in.q, in.layout);
  kp.k_stride = seq_strides(in.k, in.layout);
  kp.v_stride = seq_strides(in.v, in.layout);
  kp.out_stride = out_stride;
  kp.q2k_idx = in.q2k_idx.data;
  kp.q2k_num = in.q2k_num.data;
  kp.vbs = in.variable_block_sizes.data;
  kp.idx_is_64 = in.q2k_idx.dtype == DType::i64;
  kp.num_is_64 = in.q2k_num.dtype == DType::i64;
  kp.vbs_is_64 = in.variable_block_sizes.dtype == DType::i64;
  kp.q_vbs = in.q_variable_block_sizes.data;  // null when absent
  kp.q_vbs_is_64 = in.q_variable_block_sizes.dtype == DType::i64;
  kp.heads = static_cast<int>(s.heads);
  kp.kv_group = static_cast<int>(s.heads / s.kv_heads);
  kp.num_q_blocks = static_cast<int>(s.num_q_blocks);
  kp.max_kv = static_cast<int>(s.max_kv);
  kp.block = static_cast<int>(s.block);
  kp.scale_log2 = scale * kLog2e;
  if (p.coarse.defined()) {  // the fused gate combine: 16-byte loads of coarse and gate chunks
    if (reinterpret_cast<std::uintptr_t>(p.coarse.data) % 16 != 0)
      throw Error(ErrorKind::unsupported, "coarse.data", "a 16-byte aligned pointer on CUDA",
                  "an unaligned pointer");
    kp.coarse = static_cast<const float*>(p.coarse.data);
  }
  if (p.gate.defined()) {
    kp.gate_stride = chunked_row_strides(p.gate, in.layout, "gate");
    kp.gate = p.gate.data;
  }
  if (p.fine.defined()) {
    kp.fine_stride = chunked_row_strides(p.fine, in.layout, "fine");
    kp.fine = p.fine.data;
  }

  const WalkPhase phase = walk_phase(s, in.q.dtype, in.q.device_index);
  kp.walk_sms = phase.sms;
  kp.walk_ramp_waves = phase.ramp_waves;

  const KernelFamily kernel = kernel_family_for(device_arch(in.q.device_index));
  const DeviceGuard device(in.q.device_index);
  const auto stream = static_cast<cudaStream_t>(p.stream);
  if (in.q.dtype == DType::bf16)
    launch_for_dim<__nv_bfloat16>(kp, s, in.q.device_index, stream, kernel);
  else
    launch_for_dim<__half>(kp, s, in.q.device_index, stream, kernel);
}

}  // namespace vsa::cuda
