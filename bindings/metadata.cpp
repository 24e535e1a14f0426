#include "metadata.hpp"

#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include <nanobind/ndarray.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "tensor_ref.hpp"
#include "vsa/metadata.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vsa::python {
namespace {

using Triple = std::tuple<std::int64_t, std::int64_t, std::int64_t>;
using IndexArray = nb::ndarray<nb::numpy, std::int64_t, nb::ndim<1>>;

LatentShape to_latent(const Triple& s) { return {std::get<0>(s), std::get<1>(s), std::get<2>(s)}; }
TileShape to_tile(const Triple& s) { return {std::get<0>(s), std::get<1>(s), std::get<2>(s)}; }

// Hands a vector to numpy without copying: the array owns it through a capsule.
IndexArray to_numpy(std::vector<std::int64_t>&& values) {
  auto* owned = new std::vector<std::int64_t>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<std::int64_t>*>(p); });
  return IndexArray(owned->data(), {owned->size()}, owner);
}

void run_map_to_index(const InArray& block_map, const OutArray& q2k_idx, const OutArray& q2k_num,
                      std::uintptr_t stream) {
  const TensorRef map = to_tensor_ref(block_map, "block_map");
  const TensorRef idx = to_tensor_ref(q2k_idx, "q2k_idx");
  const TensorRef num = to_tensor_ref(q2k_num, "q2k_num");
  nb::gil_scoped_release no_gil;
  map_to_index(map, idx, num, as_stream(stream));
}

void run_invert_indices(const InArray& q2k_idx, const InArray& q2k_num, const OutArray& k2q_idx,
                        const OutArray& k2q_num, std::int64_t num_kv_blocks,
                        std::uintptr_t stream) {
  const TensorRef idx = to_tensor_ref(q2k_idx, "q2k_idx");
  const TensorRef num = to_tensor_ref(q2k_num, "q2k_num");
  const TensorRef inv_idx = to_tensor_ref(k2q_idx, "k2q_idx");
  const TensorRef inv_num = to_tensor_ref(k2q_num, "k2q_num");
  nb::gil_scoped_release no_gil;
  invert_indices(idx, num, num_kv_blocks, inv_idx, inv_num, as_stream(stream));
}

void run_topk_to_index(const InArray& topk, const OutArray& q2k_idx, const OutArray& q2k_num,
                       std::uintptr_t stream) {
  const TensorRef top = to_tensor_ref(topk, "topk");
  const TensorRef idx = to_tensor_ref(q2k_idx, "q2k_idx");
  const TensorRef num = to_tensor_ref(q2k_num, "q2k_num");
  nb::gil_scoped_release no_gil;
  topk_to_index(top, idx, num, as_stream(stream));
}

void run_pack_varlen_index(const InArray& local_idx, const InArray& q2k_num, const InArray& cu_q_blocks,
                           const InArray& cu_kv_blocks, const OutArray& packed_idx, std::uintptr_t stream) {
  const TensorRef idx = to_tensor_ref(local_idx, "local_idx");
  const TensorRef num = to_tensor_ref(q2k_num, "q2k_num");
  const TensorRef cu_q = to_tensor_ref(cu_q_blocks, "cu_q_blocks");
  const TensorRef cu_kv = to_tensor_ref(cu_kv_blocks, "cu_kv_blocks");
  const TensorRef packed = to_tensor_ref(packed_idx, "packed_idx");
  nb::gil_scoped_release no_gil;
  pack_varlen_index(idx, num, cu_q, cu_kv, packed, as_stream(stream));
}

}  // namespace

void bind_metadata(nb::module_& m) {
  m.def("map_to_index", &run_map_to_index, "block_map"_a, "q2k_idx"_a, "q2k_num"_a, "stream"_a,
        "block_map [B, H, NQ, NK] bool -> the caller's q2k_idx [B, H, NQ, NK] (ascending, then "
        "-1) and q2k_num [B, H, NQ].");
  // Unlike the C++ signature, num_kv_blocks comes after the outputs: scalars
  // follow arrays in every binding (see module.cpp).
  m.def("invert_indices", &run_invert_indices, "q2k_idx"_a, "q2k_num"_a, "k2q_idx"_a,
        "k2q_num"_a, "num_kv_blocks"_a, "stream"_a,
        "q2k lists -> the caller's k2q_idx [B, H, NK, max_q] and k2q_num [B, H, NK].");
  m.def("topk_to_index", &run_topk_to_index, "topk"_a, "q2k_idx"_a, "q2k_num"_a, "stream"_a,
        "topk [B, H, NQ, K] -> the caller's q2k_idx (sorted ascending) and q2k_num (= K).");
  m.def("pack_varlen_index", &run_pack_varlen_index, "local_idx"_a, "q2k_num"_a, "cu_q_blocks"_a,
        "cu_kv_blocks"_a, "packed_idx"_a, "stream"_a,
        "Lists local to each sequence of a packed batch -> the caller's packed_idx over the packed "
        "sequence (ids + the sequence's first KV block, then -1).");

  m.def("num_tiles",
        [](const Triple& latent, const Triple& tile) { return num_tiles(to_latent(latent), to_tile(tile)); },
        "latent"_a, "tile"_a, "Number of tiles covering a (T, H, W) latent.");
  m.def("tile_partition_indices",
        [](const Triple& latent, const Triple& tile) {
          return to_numpy(tile_partition_indices(to_latent(latent), to_tile(tile)));
        },
        "latent"_a, "tile"_a, "Raster token index of each token in tiled order (int64 numpy).");
  m.def("reverse_tile_partition_indices",
        [](const Triple& latent, const Triple& tile) {
          return to_numpy(reverse_tile_partition_indices(to_latent(latent), to_tile(tile)));
        },
        "latent"_a, "tile"_a, "Inverse permutation of tile_partition_indices (int64 numpy).");
  m.def("variable_block_sizes",
        [](const Triple& latent, const Triple& tile) {
          return to_numpy(variable_block_sizes(to_latent(latent), to_tile(tile)));
        },
        "latent"_a, "tile"_a, "Valid tokens per tile (int64 numpy).");
  m.def("non_pad_index",
        [](const std::vector<std::int64_t>& vbs, std::int64_t block) {
          return to_numpy(non_pad_index(vbs, block));
        },
        "variable_block_sizes"_a, "block"_a,
        "Positions of real tokens in the block-padded sequence (int64 numpy).");
}

}  // namespace vsa::python
