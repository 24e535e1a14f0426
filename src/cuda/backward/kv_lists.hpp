// The backward's KV->Q lists, built on the GPU from the q2k lists: for each
// (batch, head, kv block) the query blocks whose first q2k_num entries name
// it, ascending, once per occurrence — in one array with an offset per list
// (no per-list capacity, so duplicates never overflow). Placing each head's
// entries in query-block order (no sort) makes the order, and with it dK and
// dV, the same on every run. Also the key pass's work order: within each
// (batch, kv head), its CTAs take the kv blocks with the most listed query
// blocks first, so the longest lists (real top-k lists are skewed) do not
// start last.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace vsa::cuda {

// Each head's query blocks are counted and placed in this many ranges, a CTA
// each: with one CTA per head the placement ran on 12 SMs on Wan 480p (67 µs).
constexpr int kListRanges = 8;

struct KvListArgs {
  const void* q2k_idx;  // [B·H·NQ, max_kv]
  const void* q2k_num;  // [B·H·NQ]
  bool idx_is_64, num_is_64;
  std::int64_t rows;  // B·H·NQ
  int num_q_blocks, max_kv, num_kv_blocks;
  int kv_group;  // query heads per kv head
  // Scratch and result, from the backward's workspace:
  int* cursors;     // [B·H, kListRanges, NK]: counts per range of query blocks
  int* offsets;     // [B·H·NK + 1]: list l is blocks[offsets[l], offsets[l+1])
  int* blocks;      // [B·H·NQ·max_kv]
  int* order;       // [B·Hkv·NK]: the key pass's (batch, kv head, kv block) items, per head most listed first
  // Or null: [B·H·NQ·max_kv], for each listed q2k entry its position in `blocks` (the stored-dS
  // path's tile of that pair; entries past q2k_num or with ids outside [0, NK) are not written).
  int* slots;
};

// Enqueues the passes on `stream`; no host synchronization.
void build_kv_lists(const KvListArgs& a, cudaStream_t stream);

}  // namespace vsa::cuda
