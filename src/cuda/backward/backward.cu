// Host side of the CUDA backward: checks what only the CUDA kernels need,
// carves the workspace, and enqueues the passes on the caller's stream with
// no host synchronization (so it can be captured in a CUDA graph):
//
//   1. delta = rowsum(dO ∘ O) (and, on the atomic path, a zeroed fp32 dQ
//      accumulator);
//   2. the KV->Q lists (kv_lists.cu);
//   3. the key pass, from the family kernel_choice picks: a CTA per 64-key
//      tile writes its dK and dV once (and adds dS·K into the accumulator,
//      or stores its dSᵀ tiles);
//   4. dq: scale · accumulator into the caller's dq, or the dQ pass, a CTA
//      per 64-row query tile summing dS·K in list order (from the stored
//      dSᵀ tiles, or recomputing dS); kernel_choice.hpp says which.
//
// 2 and 3 (and the dQ pass) run once per chunk of (batch, kv head) units whose lists fit int32
// (workspace.hpp, ListChunks: nearly always one chunk, the whole problem). On the stored-dS
// path 3 and 4 run once per group of units of a chunk whose tiles fit the workspace's cap
// (kernel_choice.hpp).
//
// dk and dv are bitwise repeatable (each is summed in one CTA, in list
// order); on the atomic path dq's last bits may differ run to run.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

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

// One list chunk (workspace.hpp, ListChunks): kv heads [kv_head, kv_head + kv_heads) of batches
// [batch, batch + batches); either every kv head or one batch.
struct UnitChunk {
  std::int64_t batch, batches, kv_head, kv_heads;
};

// `base` moved on by `bytes` (null stays null); T is void or const void.
template <class T>
T* moved_bytes(T* base, std::int64_t bytes) {
  using Byte = std::conditional_t<std::is_const_v<T>, const unsigned char, unsigned char>;
  return base == nullptr ? nullptr : static_cast<T*>(static_cast<Byte*>(base) + bytes);
}
template <class T>
T* moved(T* base, std::int64_t elements) {
  return base == nullptr ? nullptr : base + elements;
}

// The key and dQ passes' params for one chunk, a problem of its own: every tensor's pointer moved
// to the chunk's first (batch, kv head) and the first of its query heads, the chunk's query heads
// as the heads. Its query heads are consecutive in every [B, H, ...] tensor (lse, delta, the dQ
// accumulator, the q2k lists, dq_mean are contiguous), and so are its kv heads in [B, Hkv, ...]:
// its (batch, head) indices are the problem's less the first.
BwdKernelParams chunk_params(const BwdKernelParams& kp, const ProblemShape& s, const UnitChunk& c,
                             std::size_t idx_size, std::size_t num_size) {
  constexpr std::int64_t kElemBytes = 2;  // q, k, v, dout, dq, dk, dv
  const std::int64_t first_head = c.kv_head * kp.kv_group;         // the chunk's first query head
  const std::int64_t first_row = c.batch * s.heads + first_head;   // its first (batch, head) of [B, H]
  const std::int64_t first_unit = c.batch * s.kv_heads + c.kv_head;  // of [B, Hkv]
  const auto rows = [&](auto* base, const SeqStrides& st, std::int64_t head) {
    return moved_bytes(base, (c.batch * st.batch + head * st.head) * kElemBytes);
  };
  BwdKernelParams p = kp;
  p.q = rows(kp.q, kp.q_stride, first_head);
  p.dout = rows(kp.dout, kp.dout_stride, first_head);
  p.dq = rows(kp.dq, kp.dq_stride, first_head);
  p.k = rows(kp.k, kp.k_stride, c.kv_head);
  p.v = rows(kp.v, kp.v_stride, c.kv_head);
  p.dk = rows(kp.dk, kp.dk_stride, c.kv_head);
  p.dv = rows(kp.dv, kp.dv_stride, c.kv_head);
  p.lse = moved(kp.lse, first_row * s.seq_q);
  p.delta = moved(kp.delta, first_row * s.seq_q);
  p.dq_accum = moved(kp.dq_accum, first_row * s.seq_q * s.head_dim);
  p.q2k_idx = moved_bytes(kp.q2k_idx, first_row * s.num_q_blocks * s.max_kv * static_cast<std::int64_t>(idx_size));
  p.q2k_num = moved_bytes(kp.q2k_num, first_row * s.num_q_blocks * static_cast<std::int64_t>(num_size));
  p.dq_mean = moved(kp.dq_mean, first_row * s.num_q_blocks * s.head_dim);
  p.dk_mean = moved(kp.dk_mean, first_unit * s.num_kv_blocks * s.head_dim);
  p.dv_mean = moved(kp.dv_mean, first_unit * s.num_kv_blocks * s.head_dim);
  p.heads = static_cast<int>(c.kv_heads * kp.kv_group);
  return p;
}

template <class Elem, int kHeadDim>
void launch_passes(const BackwardParams& p, const ProblemShape& s, float scale, const BwdWorkspace& ws,
                   KernelFamily family, DqMethod method, cudaStream_t stream) {
  auto* base = static_cast<unsigned char*>(p.workspace);
  const AttentionInputs& in = p.in;

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

  KvListArgs lists{};
  lists.idx_is_64 = in.q2k_idx.dtype == DType::i64;
  lists.num_is_64 = in.q2k_num.dtype == DType::i64;
  lists.num_q_blocks = static_cast<int>(s.num_q_blocks);
  lists.max_kv = static_cast<int>(s.max_kv);
  lists.num_kv_blocks = static_cast<int>(s.num_kv_blocks);
  lists.cursors = reinterpret_cast<int*>(base + ws.cursors);
  lists.offsets = reinterpret_cast<int*>(base + ws.offsets);
  lists.blocks = reinterpret_cast<int*>(base + ws.blocks);
  lists.order = reinterpret_cast<int*>(base + ws.order);
  lists.kv_group = static_cast<int>(s.heads / s.kv_heads);
  lists.slots = method == DqMethod::stored_ds ? reinterpret_cast<int*>(base + ws.ds_slots) : nullptr;

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
  const std::size_t idx_size = dtype_size(in.q2k_idx.dtype), num_size = dtype_size(in.q2k_num.dtype);

  // The lists, then the key pass (and the dQ pass), chunk by chunk; one chunk, the whole problem,
  // unless its lists would overflow int32 (ListChunks).
  for (std::int64_t b = 0; b < s.batch; b += ws.chunks.batches_per_chunk) {
    for (std::int64_t h = 0; h < s.kv_heads; h += ws.chunks.kv_heads_per_chunk) {
      const UnitChunk chunk{b, std::min(ws.chunks.batches_per_chunk, s.batch - b), h,
                            std::min(ws.chunks.kv_heads_per_chunk, s.kv_heads - h)};
      const BwdKernelParams cp = chunk_params(kp, s, chunk, idx_size, num_size);
      KvListArgs chunk_lists = lists;
      chunk_lists.q2k_idx = cp.q2k_idx;
      chunk_lists.q2k_num = cp.q2k_num;
      chunk_lists.rows = chunk.batches * cp.heads * s.num_q_blocks;
      build_kv_lists(chunk_lists, stream);
      const auto units = static_cast<int>(chunk.batches * chunk.kv_heads);
      if (method == DqMethod::stored_ds) {
        const auto per_group = static_cast<int>(ws.ds.units_per_group);
        for (int first = 0; first < units; first += per_group) {
          BwdKernelParams group = cp;
          group.kv_order = cp.kv_order + static_cast<std::int64_t>(first) * s.num_kv_blocks;
          group.ds_first_unit = first;
          group.ds_tiles = base + ws.ds_tiles;
          const int count = std::min(per_group, units - first);
          if (is_hopper(family)) {
            sm90::launch_bwd<Elem, kHeadDim>(group, kv_tiles, count, stream);
            sm90::launch_bwd_dq_stored<Elem, kHeadDim>(group, count * cp.kv_group, stream);
          } else {
            sm80::launch_bwd<Elem, kHeadDim>(group, kv_tiles, count, stream);
            sm80::launch_bwd_dq_stored<Elem, kHeadDim>(group, count * cp.kv_group, stream);
          }
        }
      } else if (is_hopper(family)) {  // atomic
        sm90::launch_bwd<Elem, kHeadDim>(cp, kv_tiles, units, stream);
      } else {
        sm80::launch_bwd<Elem, kHeadDim>(cp, kv_tiles, units, stream);
      }
    }
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
