// Metadata for block-sparse attention: lists of blocks, their inversion, and
// the tiling of a (T, H, W) video latent into 64-token blocks (VSA's layout).
// Functions taking TensorRefs run on the device that holds the tensors. An
// output shares no memory with the other tensors of its call (vsa/attention.hpp
// says how that is checked), except as noted below: an output that is its
// input itself.
#pragma once

#include <cstdint>
#include <vector>

#include "vsa/tensor.hpp"

namespace vsa {

// block_map [B, H, NQ, NK] bool -> q2k_idx [B, H, NQ, NK] (listed ascending,
// the rest -1) and q2k_num [B, H, NQ]; outputs int32 or int64, both the same.
void map_to_index(const TensorRef& block_map, const TensorRef& q2k_idx, const TensorRef& q2k_num,
                  void* stream = nullptr);

// q2k lists -> k2q lists: k2q_idx [B, H, NK, max_q] holds, for KV block j, the
// query blocks i whose first q2k_num[i] entries name j, ascending, once per
// occurrence; entries past k2q_num are -1. max_q = NQ suffices without
// duplicates; a smaller capacity that overflows is an error on the CPU.
void invert_indices(const TensorRef& q2k_idx, const TensorRef& q2k_num, std::int64_t num_kv_blocks,
                    const TensorRef& k2q_idx, const TensorRef& k2q_num, void* stream = nullptr);

// topk [B, H, NQ, K] block ids (any order) -> q2k_idx [B, H, NQ, K] ascending
// and q2k_num [B, H, NQ] filled with K; outputs of one int dtype, as above.
// q2k_idx may be topk itself (the same view: dtype, shape and strides).
void topk_to_index(const TensorRef& topk, const TensorRef& q2k_idx, const TensorRef& q2k_num,
                   void* stream = nullptr);

// Variable-length batches: N sequences (videos) packed one after another
// along the block axis, each attending only within itself.
//   cu_q_blocks [N+1], cu_kv_blocks [N+1]: int32/int64 block offsets (like
//     cu_seqlens, counted in blocks): sequence s owns query blocks
//     [cu_q_blocks[s], cu_q_blocks[s+1]) and KV blocks [cu_kv_blocks[s],
//     cu_kv_blocks[s+1]); both start at 0 and never decrease, cu_q_blocks
//     ends at NQ.
//   local_idx [B, H, NQ, max_kv], q2k_num [B, H, NQ]: each query block's list
//     of KV blocks of its own sequence, numbered from 0 within it.
// Writes packed_idx (local_idx's shape; int32 or int64; may be local_idx
// itself, the same view): the first q2k_num entries of each row plus its
// sequence's first KV block, -1 after them. With q2k_num, that is an ordinary q2k list over
// the packed sequence, ready for block_sparse_attn. On the CPU every value is
// checked (offsets, counts, ids within their sequence) before anything is
// written; on CUDA they are a precondition (reading them would cost a device
// sync), but no read or write leaves the tensors' bounds.
void pack_varlen_index(const TensorRef& local_idx, const TensorRef& q2k_num,
                       const TensorRef& cu_q_blocks, const TensorRef& cu_kv_blocks,
                       const TensorRef& packed_idx, void* stream = nullptr);

struct LatentShape { std::int64_t t, h, w; };
struct TileShape { std::int64_t t = 4, h = 4, w = 4; };

// Number of tiles in all: the product of the tiles along each axis (ceil division).
std::int64_t num_tiles(const LatentShape& latent, const TileShape& tile);

// Raster token index of each token in tiled order: tiles in (t, h, w) raster
// order, tokens inside a tile in raster order, partial tiles holding only
// their valid tokens (no padding). Length T*H*W.
std::vector<std::int64_t> tile_partition_indices(const LatentShape& latent, const TileShape& tile);

// Inverse permutation of tile_partition_indices.
std::vector<std::int64_t> reverse_tile_partition_indices(const LatentShape& latent,
                                                         const TileShape& tile);

// Valid tokens in each tile (the variable block sizes), length num_tiles.
std::vector<std::int64_t> variable_block_sizes(const LatentShape& latent, const TileShape& tile);

// Positions in the padded sequence (block b occupies [b*block, (b+1)*block))
// that hold real tokens, ascending; length sum(vbs).
std::vector<std::int64_t> non_pad_index(const std::vector<std::int64_t>& vbs, std::int64_t block);

}  // namespace vsa
