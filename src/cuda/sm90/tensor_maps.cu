#include "cuda/sm90/tensor_maps.hpp"

#include "cuda/common/block_lists.cuh"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdint>

namespace vsa::cuda::sm90 {
namespace {

// The driver's encoder, found once through the runtime (so the library does
// not link libcuda itself); null when the driver lacks it.
PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* symbol = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &symbol, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(symbol);
  }();
  return fn;
}

// A stride of a dimension of extent 1 is never stepped; TMA still wants it a
// nonzero multiple of 16 bytes, so any such value stands in.
std::uint64_t stride_bytes(std::int64_t elements, std::int64_t extent) {
  return extent == 1 ? 16u : static_cast<std::uint64_t>(elements) * 2u;
}

// A map of `rank` dimensions (dims[0] innermost; strides in bytes of dims
// 1.. ), boxes of 64 columns × 64 rows (× `box2` along dims[2]),
// out-of-bounds elements read as 0.
bool encode(PFN_cuTensorMapEncodeTiled_v12000 fn, CUtensorMap& map, const void* data, bool is_bf16, int rank,
            const cuuint64_t* dims, const cuuint64_t* strides, cuuint32_t box2 = 1) {
  const cuuint32_t box[5] = {64, static_cast<cuuint32_t>(kTileRows), box2, 1, 1};
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  return fn(&map, is_bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            static_cast<cuuint32_t>(rank), const_cast<void*>(data), dims, strides, box, element_strides,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Q as [B][H][S][D]: a box at any row.
bool encode_rows(PFN_cuTensorMapEncodeTiled_v12000 fn, CUtensorMap& map, const void* data, bool is_bf16,
                 const SeqStrides& stride, int batch, int heads, std::int64_t seq, int head_dim) {
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(seq),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[3] = {stride_bytes(stride.seq, seq), stride_bytes(stride.head, heads),
                                 stride_bytes(stride.batch, batch)};
  return encode(fn, map, data, is_bf16, 4, dims, strides);
}

// Q as [B][H][D / 64][S][64]: the 64-column blocks of a row are a dimension of
// their own (128 bytes apart), so one box holds a whole [64][D] tile, landing
// as the swizzled tile's column blocks one after another (load_query_tile_whole).
bool encode_row_tiles(PFN_cuTensorMapEncodeTiled_v12000 fn, CUtensorMap& map, const void* data, bool is_bf16,
                      const SeqStrides& stride, int batch, int heads, std::int64_t seq, int head_dim) {
  const int blocks = head_dim / 64;
  const cuuint64_t dims[5] = {64, static_cast<cuuint64_t>(seq), static_cast<cuuint64_t>(blocks),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[4] = {stride_bytes(stride.seq, seq), stride_bytes(64, blocks),
                                 stride_bytes(stride.head, heads), stride_bytes(stride.batch, batch)};
  return encode(fn, map, data, is_bf16, 5, dims, strides, static_cast<cuuint32_t>(blocks));
}

// K or V as [B][H][S / 64][64][D] (S is whole blocks, so whole 64-key tiles):
// a box's rows stay inside one tile, and rows before the tile's first are
// out of bounds, so a partial tile can be read with its padding as zeros
// (request_key_tile).
bool encode_key_tiles(PFN_cuTensorMapEncodeTiled_v12000 fn, CUtensorMap& map, const void* data, bool is_bf16,
                      const SeqStrides& stride, int batch, int heads, std::int64_t seq, int head_dim) {
  const std::int64_t tiles = seq / kTileRows;
  const cuuint64_t dims[5] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(kTileRows),
                              static_cast<cuuint64_t>(tiles), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[4] = {stride_bytes(stride.seq, kTileRows), stride_bytes(stride.seq * kTileRows, tiles),
                                 stride_bytes(stride.head, heads), stride_bytes(stride.batch, batch)};
  return encode(fn, map, data, is_bf16, 5, dims, strides);
}

}  // namespace

bool encode_bwd_query_maps(const BwdKernelParams& p, bool is_bf16, int batch, int head_dim, BwdQueryMaps& maps) {
  const PFN_cuTensorMapEncodeTiled_v12000 fn = encoder();
  return fn != nullptr &&
         encode_row_tiles(fn, maps.q, p.q, is_bf16, p.q_stride, batch, p.heads, p.seq_q, head_dim) &&
         encode_row_tiles(fn, maps.dout, p.dout, is_bf16, p.dout_stride, batch, p.heads, p.seq_q, head_dim);
}

bool encode_fwd_tensor_maps(const FwdKernelParams& p, bool is_bf16, int batch, int kv_heads, std::int64_t seq_q,
                            std::int64_t seq_kv, int head_dim, FwdTensorMaps& maps) {
  const PFN_cuTensorMapEncodeTiled_v12000 fn = encoder();
  return fn != nullptr && encode_rows(fn, maps.q, p.q, is_bf16, p.q_stride, batch, p.heads, seq_q, head_dim) &&
         encode_key_tiles(fn, maps.k, p.k, is_bf16, p.k_stride, batch, kv_heads, seq_kv, head_dim) &&
         encode_key_tiles(fn, maps.v, p.v, is_bf16, p.v_stride, batch, kv_heads, seq_kv, head_dim);
}

}  // namespace vsa::cuda::sm90
