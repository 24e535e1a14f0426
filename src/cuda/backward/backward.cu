// Host side of the CUDA backward: checks what only the CUDA kernels need,
// carves the workspace, and enqueues the passes on the caller's stream with
// no host synchronization (so it can be captured in a CUDA graph):
//
//   1. the KV->Q lists (kv_lists.cu);
//   2. delta = rowsum(dO ∘ O) (and, on the atomic path, a zeroed fp32 dQ
//      accumulator);
//   3. the key pass, from the family kernel_choice picks: a CTA per 64-key
//      tile writes its dK and dV once (and adds dS·K into the accumulator,
//      or stores its dSᵀ tiles);
//   4. dq: scale · accumulator into the caller's dq, or the dQ pass, a CTA
//      per 64-row query tile summing dS·K in list order (from the stored
//      dSᵀ tiles, or recomputing dS); kernel_choice.hpp says which.
//
// On the stored-dS path 3 and 4 run once per group of (batch, kv head) units
// whose tiles fit the workspace's cap (kernel_choice.hpp).
//
// dk and dv are bitwise repeatable (each is summed in one CTA, in list
// order); on the atomic path dq's last bits may differ run to run.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/backward/kv_lists.hpp"
#include "cuda/backward/row_passes.hpp"
#include "cuda/backward/workspace.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_guard.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/kernel_choice.hpp"
#include "cuda/sm80/bwd_launch.hpp"
#include "cuda/sm90/bwd_launch.hpp"
#include "cuda/tensor_views.hpp"

namespace vsa::cuda {
namespace {

void expect_aligned_rows(const TensorRef& t, const char* name, Layout layout) {
  if (!rows_aligned(t, layout))
    throw Error(ErrorKind::unsupported, std::string(name) + ".stride",
                "16-byte aligned rows on CUDA (data aligned to 16 bytes, strides multiples of 8 elements)",
                "unaligned rows");
}

void check_cuda_backward(const BackwardParams& p, const BwdWorkspace& ws) {
  const Layout layout = p.in.layout;
  expect_aligned_rows(p.in.q, "q", layout);
  expect_aligned_rows(p.in.k, "k", layout);
  expect_aligned_rows(p.in.v, "v", layout);
  expect_aligned_rows(p.out, "out", layout);
  expect_aligned_rows(p.dout, "dout", layout);
  expect_aligned_rows(p.dq, "dq", layout);
  expect_aligned_rows(p.dk, "dk", layout);
  expect_aligned_rows(p.dv, "dv", layout);
  if (reinterpret_cast<std::uintptr_t>(p.lse.data) % 16 != 0)
    throw Error(ErrorKind::unsupported, "lse.data", "a 16-byte aligned pointer on CUDA", "an unaligned pointer");
  if (p.workspace == nullptr || p.workspace_bytes < ws.total)
    throw Error(ErrorKind::invalid_argument, "workspace",
                std::to_string(ws.total) + " bytes of device memory (backward_workspace_bytes)",
                p.workspace == nullptr ? std::string("none") : std::to_string(p.workspace_bytes) + " bytes");
  if (reinterpret_cast<std::uintptr_t>(p.workspace) % 256 != 0)
    throw Error(ErrorKind::invalid_argument, "workspace", "a 256-byte aligned pointer", "an unaligned pointer");
}

template <class Elem, int kHeadDim>
void launch_passes(const BackwardParams& p, const ProblemShape& s, float scale, const BwdWorkspace& ws,
                   KernelFamily family, DqMethod method, cudaStream_t stream) {
  auto* base = static_cast<unsigned char*>(p.workspace);
  const AttentionInputs& in = p.in;

  KvListArgs lists{};
  lists.q2k_idx = in.q2k_idx.data;
  lists.q2k_num = in.q2k_num.data;
  lists.idx_is_64 = in.q2k_idx.dtype == DType::i64;
  lists.num_is_64 = in.q2k_num.dtype == DType::i64;
  lists.rows = s.batch * s.heads * s.num_q_blocks;
  lists.num_q_blocks = static_cast<int>(s.num_q_blocks);
  lists.max_kv = static_cast<int>(s.max_kv);
  lists.num_kv_blocks = static_cast<int>(s.num_kv_blocks);
  lists.cursors = reinterpret_cast<int*>(base + ws.cursors);
  lists.offsets = reinterpret_cast<int*>(base + ws.offsets);
  lists.blocks = reinterpret_cast<int*>(base + ws.blocks);
  lists.order = reinterpret_cast<int*>(base + ws.order);
  lists.kv_group = static_cast<int>(s.heads / s.kv_heads);
  lists.slots = method == DqMethod::stored_ds ? reinterpret_cast<int*>(base + ws.ds_slots) : nullptr;
  build_kv_lists(lists, stream);

  RowPassParams rows{};
  rows.out = p.out.data;
  rows.dout = p.dout.data;
  rows.dq = p.dq.data;
  rows.out_stride = seq_strides(p.out, in.layout);
  rows.dout_stride = seq_strides(p.dout, in.layout);
  rows.dq_stride = seq_strides(p.dq, in.layout);
  rows.delta = reinterpret_cast<float*>(base + ws.delta);
  rows.dq_accum = reinterpret_cast<float*>(base + ws.dq_accum);
  rows.batch = static_cast<int>(s.batch);
  rows.heads = static_cast<int>(s.heads);
  rows.seq_q = s.seq_q;
  rows.scale = scale;
  rows.dq_mean = static_cast<const float*>(p.dq_mean.data);  // null when undefined
  rows.q_vbs = in.q_variable_block_sizes.data;
  rows.q_vbs_is_64 = in.q_variable_block_sizes.dtype == DType::i64;
  rows.block = static_cast<int>(s.block);
  rows.num_q_blocks = static_cast<int>(s.num_q_blocks);
  const bool atomic_dq = method == DqMethod::atomic;
  if (atomic_dq)
    check_cuda(cudaMemsetAsync(rows.dq_accum, 0, ws.cursors - ws.dq_accum, stream), "cudaMemsetAsync(dq accumulator)");
  launch_delta<Elem, kHeadDim>(rows, stream);

  BwdKernelParams kp{};
  kp.q = in.q.data;
  kp.k = in.k.data;
  kp.v = in.v.data;
  kp.dout = p.dout.data;
  kp.dk = p.dk.data;
  kp.dv = p.dv.data;
  kp.q_stride = seq_strides(in.q, in.layout);
  kp.k_stride = seq_strides(in.k, in.layout);
  kp.v_stride = seq_strides(in.v, in.layout);
  kp.dout_stride = rows.dout_stride;
  kp.dk_stride = seq_strides(p.dk, in.layout);
  kp.dv_stride = seq_strides(p.dv, in.layout);
  kp.lse = static_cast<const float*>(p.lse.data);
  kp.delta = rows.delta;
  kp.dq_accum = atomic_dq ? rows.dq_accum : nullptr;
  kp.dq = p.dq.data;
  kp.dq_stride = rows.dq_stride;
  kp.k2q_offsets = lists.offsets;
  kp.k2q_blocks = lists.blocks;
  kp.q2k_idx = in.q2k_idx.data;
  kp.q2k_num = in.q2k_num.data;
  kp.vbs = in.variable_block_sizes.data;
  kp.idx_is_64 = lists.idx_is_64;
  kp.num_is_64 = lists.num_is_64;
  kp.vbs_is_64 = in.variable_block_sizes.dtype == DType::i64;
  kp.q_vbs = in.q_variable_block_sizes.data;  // null when absent
  kp.q_vbs_is_64 = in.q_variable_block_sizes.dtype == DType::i64;
  kp.dq_mean = rows.dq_mean;
  kp.dk_mean = static_cast<const float*>(p.dk_mean.data);
  kp.dv_mean = static_cast<const float*>(p.dv_mean.data);
  kp.kv_order = lists.order;
  kp.ds_slots = lists.slots;
  kp.heads = static_cast<int>(s.heads);
  kp.kv_group = static_cast<int>(s.heads / s.kv_heads);
  kp.num_q_blocks = static_cast<int>(s.num_q_blocks);
  kp.max_kv = static_cast<int>(s.max_kv);
  kp.num_kv_blocks = static_cast<int>(s.num_kv_blocks);
  kp.block = static_cast<int>(s.block);
  kp.seq_q = s.seq_q;
  kp.scale_log2 = scale * kLog2e;
  kp.scale = scale;
  const int kv_tiles = static_cast<int>(s.num_kv_blocks * (s.block / 64));  // 64-key tiles
  const int units = static_cast<int>(s.batch * s.kv_heads);
  if (method == DqMethod::stored_ds) {
    for (std::int64_t g = 0; g < ws.ds.groups(); ++g) {
      const std::int64_t first = g * ws.ds.units_per_group;
      BwdKernelParams group = kp;
      group.kv_order = kp.kv_order + first * s.num_kv_blocks;
      group.ds_first_unit = static_cast<int>(first);
      group.ds_tiles = base + ws.ds_tiles;
      const int count = static_cast<int>(std::min(ws.ds.units_per_group, ws.ds.units - first));
      if (is_hopper(family)) {
        sm90::launch_bwd<Elem, kHeadDim>(group, kv_tiles, count, stream);
        sm90::launch_bwd_dq_stored<Elem, kHeadDim>(group, count * kp.kv_group, stream);
      } else {
        sm80::launch_bwd<Elem, kHeadDim>(group, kv_tiles, count, stream);
        sm80::launch_bwd_dq_stored<Elem, kHeadDim>(group, count * kp.kv_group, stream);
      }
    }
  } else if (is_hopper(family)) {  // atomic
    sm90::launch_bwd<Elem, kHeadDim>(kp, kv_tiles, units, stream);
  } else {
    sm80::launch_bwd<Elem, kHeadDim>(kp, kv_tiles, units, stream);
  }
  if (atomic_dq) launch_dq_finish<Elem, kHeadDim>(rows, stream);
}

template <class Elem>
void launch_for_dim(const BackwardParams& p, const ProblemShape& s, float scale, const BwdWorkspace& ws,
                    KernelFamily family, DqMethod method, cudaStream_t stream) {
  if (s.head_dim == 64)
    launch_passes<Elem, 64>(p, s, scale, ws, family, method, stream);
  else
    launch_passes<Elem, 128>(p, s, scale, ws, family, method, stream);
}

}  // namespace

std::size_t backward_workspace_bytes(const BackwardParams& p, const ProblemShape& s) {
  const KernelFamily family = kernel_family_for(device_arch(p.in.q.device_index));
  return BwdWorkspace::layout(s, dq_method_for(family, p.deterministic, static_cast<int>(s.head_dim))).total;
}

void backward(const BackwardParams& p, const ProblemShape& s, float scale) {
  const KernelFamily family = kernel_family_for(device_arch(p.in.q.device_index));
  const DqMethod method = dq_method_for(family, p.deterministic, static_cast<int>(s.head_dim));
  const BwdWorkspace ws = BwdWorkspace::layout(s, method);
  check_cuda_backward(p, ws);
  const DeviceGuard device(p.in.q.device_index);
  const auto stream = static_cast<cudaStream_t>(p.stream);
  if (p.in.q.dtype == DType::bf16)
    launch_for_dim<__nv_bfloat16>(p, s, scale, ws, family, method, stream);
  else
    launch_for_dim<__half>(p, s, scale, ws, family, method, stream);
}

}  // namespace vsa::cuda
