// Public metadata entry points: argument checks, then the backend of the
// device holding the tensors; plus the host-side tiling of a video latent.
#include "vsa/metadata.hpp"

#include <string>

#include "core/check.hpp"
#include "core/layout.hpp"
#include "cpu/cpu_backend.hpp"
#include "cuda/cuda_backend.hpp"

namespace vsa {
namespace {

using detail::expect_addressable;
using detail::expect_contiguous;
using detail::expect_defined;
using detail::expect_int32_holds;
using detail::expect_int_dtype;
using detail::expect_rank;
using detail::expect_same_device;
using detail::expect_shape;
using detail::expect_unshared;
using detail::fail;
using detail::kInt32Ids;

std::string str(std::int64_t v) { return std::to_string(v); }

// An int32/int64 contiguous tensor of the given rank on `ref`'s device.
void expect_int_tensor(const TensorRef& t, const char* name, int rank, const TensorRef& ref,
                       const char* ref_name) {
  expect_defined(t, name);
  expect_same_device(t, name, ref, ref_name);
  expect_rank(t, name, rank);
  expect_addressable(t, name);
  expect_int_dtype(t, name);
  expect_contiguous(t, name);
}

// A q2k list pair: idx [B, H, NQ, max_kv] with max_kv >= 1 and num [B, H, NQ].
void expect_block_lists(const TensorRef& idx, const char* idx_name, const TensorRef& num,
                        const char* num_name, const TensorRef& ref, const char* ref_name) {
  expect_int_tensor(idx, idx_name, 4, ref, ref_name);
  if (idx.shape[3] < 1)
    fail(std::string(idx_name) + ".shape", "a last axis of at least 1", idx.shape_string());
  expect_int_tensor(num, num_name, 3, ref, ref_name);
  expect_shape(num, num_name, {idx.shape[0], idx.shape[1], idx.shape[2]});
}

// The two outputs of map_to_index/topk_to_index share one integer dtype, so
// every backend writes them with one code path.
void expect_matching_outputs(const TensorRef& q2k_idx, const TensorRef& q2k_num) {
  if (q2k_num.dtype != q2k_idx.dtype)
    fail("q2k_num.dtype", std::string(dtype_name(q2k_idx.dtype)) + " (as q2k_idx)",
         dtype_name(q2k_num.dtype));
}

// Block offsets [N+1] of a packed batch: 0 first, never decreasing.
void expect_offsets_values(const TensorRef& cu, const char* name) {
  if (detail::load_int(cu, 0) != 0) fail(name, "0 as its first entry", str(detail::load_int(cu, 0)));
  for (std::int64_t s = 1; s < cu.numel(); ++s)
    if (detail::load_int(cu, s) < detail::load_int(cu, s - 1))
      fail(name, "non-decreasing block offsets",
           str(detail::load_int(cu, s)) + " after " + str(detail::load_int(cu, s - 1)) + " at entry " + str(s));
}

// Host values of pack_varlen_index's inputs: the offsets, the counts, and each
// listed id within its own sequence's KV blocks.
void check_varlen_values(const TensorRef& local_idx, const TensorRef& q2k_num, const TensorRef& cu_q,
                         const TensorRef& cu_kv, DType packed_dtype) {
  expect_offsets_values(cu_q, "cu_q_blocks");
  expect_offsets_values(cu_kv, "cu_kv_blocks");
  const std::int64_t nq = local_idx.shape[2], max_kv = local_idx.shape[3];
  const std::int64_t sequences = cu_q.numel() - 1;
  // Every packed id is below the last KV offset; int32 ids must not wrap (to another sequence's block).
  if (packed_dtype == DType::i32 && detail::load_int(cu_kv, sequences) > kInt32Ids)
    fail("cu_kv_blocks", "a last offset of at most 2^31 (packed_idx is int32)",
         str(detail::load_int(cu_kv, sequences)));
  if (detail::load_int(cu_q, sequences) != nq)
    fail("cu_q_blocks", "NQ = " + str(nq) + " (local_idx.shape[2]) as its last entry",
         str(detail::load_int(cu_q, sequences)));
  for (std::int64_t s = 0; s < sequences; ++s) {
    const std::int64_t kv_blocks = detail::load_int(cu_kv, s + 1) - detail::load_int(cu_kv, s);
    for (std::int64_t i = detail::load_int(cu_q, s); i < detail::load_int(cu_q, s + 1); ++i) {
      for (std::int64_t bh = 0; bh < q2k_num.shape[0] * q2k_num.shape[1]; ++bh) {
        const std::int64_t row = bh * nq + i;
        const std::int64_t count = detail::load_int(q2k_num, row);
        if (count < 0 || count > max_kv)
          fail("q2k_num", "counts in [0, max_kv = " + str(max_kv) + "]", str(count) + " at flat row " + str(row));
        for (std::int64_t e = 0; e < count; ++e) {
          const std::int64_t j = detail::load_int(local_idx, row * max_kv + e);
          if (j < 0 || j >= kv_blocks)
            fail("local_idx",
                 "ids in [0, " + str(kv_blocks) + "), the KV blocks of sequence " + str(s) + ", before the count",
                 str(j) + " at flat row " + str(row) + ", entry " + str(e));
        }
      }
    }
  }
}

}  // namespace

void map_to_index(const TensorRef& block_map, const TensorRef& q2k_idx, const TensorRef& q2k_num,
                  void* stream) {
  expect_defined(block_map, "block_map");
  expect_rank(block_map, "block_map", 4);
  expect_addressable(block_map, "block_map");
  if (block_map.dtype != DType::boolean) fail("block_map.dtype", "bool", dtype_name(block_map.dtype));
  expect_contiguous(block_map, "block_map");
  if (block_map.shape[3] < 1)
    fail("block_map.shape", "at least one KV block (last axis)", block_map.shape_string());
  expect_block_lists(q2k_idx, "q2k_idx", q2k_num, "q2k_num", block_map, "block_map");
  expect_shape(q2k_idx, "q2k_idx", block_map);
  expect_matching_outputs(q2k_idx, q2k_num);
  // Ids below NK and counts up to NK.
  expect_int32_holds(q2k_idx, "q2k_idx", block_map.shape[3], "NK = " + str(block_map.shape[3]) + " KV blocks");
  expect_unshared({{q2k_idx, "q2k_idx"}, {q2k_num, "q2k_num"}}, {{block_map, "block_map"}});

  if (block_map.device == Device::cpu)
    cpu::map_to_index(block_map, q2k_idx, q2k_num);
  else
    cuda::map_to_index(block_map, q2k_idx, q2k_num, stream);
}

void invert_indices(const TensorRef& q2k_idx, const TensorRef& q2k_num, std::int64_t num_kv_blocks,
                    const TensorRef& k2q_idx, const TensorRef& k2q_num, void* stream) {
  expect_block_lists(q2k_idx, "q2k_idx", q2k_num, "q2k_num", q2k_idx, "q2k_idx");
  if (num_kv_blocks < 1) fail("num_kv_blocks", "at least 1", str(num_kv_blocks));
  expect_int_tensor(k2q_idx, "k2q_idx", 4, q2k_idx, "q2k_idx");
  expect_shape(k2q_idx, "k2q_idx", {q2k_idx.shape[0], q2k_idx.shape[1], num_kv_blocks, k2q_idx.shape[3]});
  expect_block_lists(k2q_idx, "k2q_idx", k2q_num, "k2q_num", q2k_idx, "q2k_idx");
  // Query-block ids below NQ; counts up to the capacity (max_q).
  expect_int32_holds(k2q_idx, "k2q_idx", q2k_idx.shape[2] - 1, "NQ = " + str(q2k_idx.shape[2]) + " query blocks");
  expect_int32_holds(k2q_num, "k2q_num", k2q_idx.shape[3], "max_q = " + str(k2q_idx.shape[3]) + " entries");
  expect_unshared({{k2q_idx, "k2q_idx"}, {k2q_num, "k2q_num"}}, {{q2k_idx, "q2k_idx"}, {q2k_num, "q2k_num"}});

  if (q2k_idx.device == Device::cpu) {
    detail::check_block_list_values(q2k_idx, "q2k_idx", q2k_num, "q2k_num", num_kv_blocks);
    cpu::invert_indices(q2k_idx, q2k_num, num_kv_blocks, k2q_idx, k2q_num);
  } else {
    cuda::invert_indices(q2k_idx, q2k_num, num_kv_blocks, k2q_idx, k2q_num, stream);
  }
}

void topk_to_index(const TensorRef& topk, const TensorRef& q2k_idx, const TensorRef& q2k_num,
                   void* stream) {
  expect_int_tensor(topk, "topk", 4, topk, "topk");
  if (topk.shape[3] < 1) fail("topk.shape", "at least one block per row (last axis)", topk.shape_string());
  expect_block_lists(q2k_idx, "q2k_idx", q2k_num, "q2k_num", topk, "topk");
  expect_shape(q2k_idx, "q2k_idx", topk);
  expect_matching_outputs(q2k_idx, q2k_num);
  // Every row's count is K.
  expect_int32_holds(q2k_num, "q2k_num", topk.shape[3], "K = " + str(topk.shape[3]) + " entries per row");
  // q2k_idx may be topk itself: every backend reads a whole row before writing it.
  expect_unshared({{q2k_idx, "q2k_idx"}, {q2k_num, "q2k_num"}}, {{detail::unless_same_view(topk, q2k_idx), "topk"}});

  if (topk.device != Device::cpu) {
    cuda::topk_to_index(topk, q2k_idx, q2k_num, stream);  // ids >= 0 is a precondition there
    return;
  }
  // The number of KV blocks is not an argument, so only the lower bound of
  // the ids can be checked here (and, for int32 lists, that an id does not
  // wrap into another, valid-looking one); the attention op checks the upper.
  const bool int32_lists = q2k_idx.dtype == DType::i32;
  for (std::int64_t e = 0; e < topk.numel(); ++e) {
    const std::int64_t id = detail::load_int(topk, e);
    if (id < 0 || (int32_lists && id >= kInt32Ids))
      fail("topk", int32_lists ? "block ids in [0, 2^31) (q2k_idx is int32)" : "block ids >= 0",
           str(id) + " at flat entry " + str(e));
  }
  cpu::topk_to_index(topk, q2k_idx, q2k_num);
}

void pack_varlen_index(const TensorRef& local_idx, const TensorRef& q2k_num, const TensorRef& cu_q_blocks,
                       const TensorRef& cu_kv_blocks, const TensorRef& packed_idx, void* stream) {
  expect_block_lists(local_idx, "local_idx", q2k_num, "q2k_num", local_idx, "local_idx");
  expect_int_tensor(cu_q_blocks, "cu_q_blocks", 1, local_idx, "local_idx");
  if (cu_q_blocks.shape[0] < 2)
    fail("cu_q_blocks.shape", "[N + 1] offsets of N >= 1 sequences", cu_q_blocks.shape_string());
  expect_int_tensor(cu_kv_blocks, "cu_kv_blocks", 1, local_idx, "local_idx");
  expect_shape(cu_kv_blocks, "cu_kv_blocks", cu_q_blocks);
  // One dtype for both offset arrays: backends read them with one flag.
  detail::expect_dtype(cu_kv_blocks, "cu_kv_blocks", cu_q_blocks.dtype);
  expect_int_tensor(packed_idx, "packed_idx", 4, local_idx, "local_idx");
  expect_shape(packed_idx, "packed_idx", local_idx);
  // packed_idx may be local_idx itself: every backend reads each entry before writing it.
  expect_unshared({{packed_idx, "packed_idx"}}, {{detail::unless_same_view(local_idx, packed_idx), "local_idx"},
                                                 {q2k_num, "q2k_num"},
                                                 {cu_q_blocks, "cu_q_blocks"},
                                                 {cu_kv_blocks, "cu_kv_blocks"}});

  if (local_idx.device == Device::cpu) {
    check_varlen_values(local_idx, q2k_num, cu_q_blocks, cu_kv_blocks, packed_idx.dtype);
    cpu::pack_varlen_index(local_idx, q2k_num, cu_q_blocks, cu_kv_blocks, packed_idx);
  } else {
    cuda::pack_varlen_index(local_idx, q2k_num, cu_q_blocks, cu_kv_blocks, packed_idx, stream);
  }
}

}  // namespace vsa
