// Tiling of a (T, H, W) video latent into (t, h, w) tiles, VSA's block
// layout: tiles in raster order over the tile grid, tokens raster order inside
// each tile, boundary tiles holding only their real tokens. Same results as
// FastVideo's vsa_utils helpers for the same inputs.
#include <algorithm>
#include <string>

#include "core/check.hpp"
#include "vsa/metadata.hpp"

namespace vsa {
namespace {

std::string triple(std::int64_t a, std::int64_t b, std::int64_t c) {
  // Appending (rather than "(" + ...) sidesteps a GCC 12 -Wrestrict false positive.
  std::string s = "(";
  s += std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(c) + ")";
  return s;
}

void check_tiling(const LatentShape& latent, const TileShape& tile) {
  if (latent.t < 1 || latent.h < 1 || latent.w < 1)
    detail::fail("latent", "positive (T, H, W)", triple(latent.t, latent.h, latent.w));
  // Token and tile counts (at most the tokens) are then int64 without overflow.
  std::int64_t tokens = 0;
  if (__builtin_mul_overflow(latent.t, latent.h, &tokens) || __builtin_mul_overflow(tokens, latent.w, &tokens))
    detail::fail("latent", "(T, H, W) whose token count T·H·W fits int64", triple(latent.t, latent.h, latent.w));
  if (tile.t < 1 || tile.h < 1 || tile.w < 1)
    detail::fail("tile", "positive (t, h, w)", triple(tile.t, tile.h, tile.w));
}

// a / b rounded up, for a >= 0 and b >= 1, without forming a + b - 1.
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); }

// The half-open token range [begin, end) that tile `index` covers on one axis.
struct Span {
  std::int64_t begin, end;
};
Span tile_span(std::int64_t index, std::int64_t tile, std::int64_t extent) {
  const std::int64_t begin = index * tile;  // < extent: index < ceil_div(extent, tile)
  return Span{begin, begin + std::min(tile, extent - begin)};
}

// Calls visit(t_span, h_span, w_span) for every tile in raster order.
template <class Visit>
void for_each_tile(const LatentShape& latent, const TileShape& tile, Visit&& visit) {
  for (std::int64_t tt = 0; tt < ceil_div(latent.t, tile.t); ++tt)
    for (std::int64_t th = 0; th < ceil_div(latent.h, tile.h); ++th)
      for (std::int64_t tw = 0; tw < ceil_div(latent.w, tile.w); ++tw)
        visit(tile_span(tt, tile.t, latent.t), tile_span(th, tile.h, latent.h),
              tile_span(tw, tile.w, latent.w));
}

}  // namespace

std::int64_t num_tiles(const LatentShape& latent, const TileShape& tile) {
  check_tiling(latent, tile);
  return ceil_div(latent.t, tile.t) * ceil_div(latent.h, tile.h) * ceil_div(latent.w, tile.w);
}

std::vector<std::int64_t> tile_partition_indices(const LatentShape& latent, const TileShape& tile) {
  check_tiling(latent, tile);
  std::vector<std::int64_t> order;
  order.reserve(static_cast<std::size_t>(latent.t * latent.h * latent.w));
  for_each_tile(latent, tile, [&](Span st, Span sh, Span sw) {
    for (std::int64_t t = st.begin; t < st.end; ++t)
      for (std::int64_t h = sh.begin; h < sh.end; ++h)
        for (std::int64_t w = sw.begin; w < sw.end; ++w) order.push_back((t * latent.h + h) * latent.w + w);
  });
  return order;
}

std::vector<std::int64_t> reverse_tile_partition_indices(const LatentShape& latent, const TileShape& tile) {
  const std::vector<std::int64_t> order = tile_partition_indices(latent, tile);
  std::vector<std::int64_t> inverse(order.size());
  for (std::size_t position = 0; position < order.size(); ++position)
    inverse[static_cast<std::size_t>(order[position])] = static_cast<std::int64_t>(position);
  return inverse;
}

std::vector<std::int64_t> variable_block_sizes(const LatentShape& latent, const TileShape& tile) {
  check_tiling(latent, tile);
  std::vector<std::int64_t> sizes;
  for_each_tile(latent, tile, [&](Span st, Span sh, Span sw) {
    sizes.push_back((st.end - st.begin) * (sh.end - sh.begin) * (sw.end - sw.begin));
  });
  return sizes;
}

std::vector<std::int64_t> non_pad_index(const std::vector<std::int64_t>& vbs, std::int64_t block) {
  if (block < 1) detail::fail("block", "a block size of at least 1", std::to_string(block));
  std::vector<std::int64_t> positions;
  for (std::size_t b = 0; b < vbs.size(); ++b) {
    if (vbs[b] < 0 || vbs[b] > block)
      detail::fail("vbs", "values in [0, block = " + std::to_string(block) + "]",
                   std::to_string(vbs[b]) + " at block " + std::to_string(b));
    if (vbs[b] == 0) continue;
    // A real token's position b·block + offset must fit int64 (it wrapped to a negative one).
    std::int64_t start = 0, last = 0;
    if (__builtin_mul_overflow(static_cast<std::int64_t>(b), block, &start) ||
        __builtin_add_overflow(start, vbs[b] - 1, &last))
      detail::fail("block", "a block size whose real tokens' positions b·block + offset fit int64",
                   std::to_string(block) + " with " + std::to_string(vbs[b]) + " real tokens in block " +
                       std::to_string(b));
    for (std::int64_t offset = 0; offset < vbs[b]; ++offset) positions.push_back(start + offset);
  }
  return positions;
}

}  // namespace vsa
