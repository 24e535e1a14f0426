// Host tiling of a video latent: hand-computed cases, properties, and the
// Wan2.1 480p shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <vector>
#include <vsa/vsa.hpp>

namespace vsa::test {
namespace {

using Ints = std::vector<std::int64_t>;

TEST(Tiling, HandComputedSpatialCase) {
  // 5x5 frame, 2x2 tiles: 3x3 tiles, the last row and column partial.
  //    0  1 |  2  3 |  4
  //    5  6 |  7  8 |  9
  //   10 11 | 12 13 | 14
  //   15 16 | 17 18 | 19
  //   20 21 | 22 23 | 24
  const LatentShape latent{1, 5, 5};
  const TileShape tile{1, 2, 2};
  EXPECT_EQ(num_tiles(latent, tile), 9);
  EXPECT_EQ(tile_partition_indices(latent, tile),
            (Ints{0, 1, 5, 6, 2, 3, 7, 8, 4, 9, 10, 11, 15, 16, 12, 13, 17, 18, 14, 19, 20, 21, 22, 23, 24}));
  EXPECT_EQ(variable_block_sizes(latent, tile), (Ints{4, 4, 2, 4, 4, 2, 2, 2, 1}));
}

TEST(Tiling, HandComputedTemporalCase) {
  // (T, H, W) = (3, 1, 2), tiles (2, 1, 2): frames {0, 1} then {2}.
  const LatentShape latent{3, 1, 2};
  const TileShape tile{2, 1, 2};
  EXPECT_EQ(tile_partition_indices(latent, tile), (Ints{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(variable_block_sizes(latent, tile), (Ints{4, 2}));
  EXPECT_EQ(non_pad_index(variable_block_sizes(latent, tile), 8), (Ints{0, 1, 2, 3, 8, 9}));
}

TEST(Tiling, PartitionIsAPermutationAndReverseIsItsInverse) {
  for (const LatentShape latent : {LatentShape{5, 7, 9}, LatentShape{4, 8, 8}, LatentShape{1, 1, 1}}) {
    const TileShape tile{};
    const Ints order = tile_partition_indices(latent, tile);
    const Ints reverse = reverse_tile_partition_indices(latent, tile);
    const std::int64_t tokens = latent.t * latent.h * latent.w;
    ASSERT_EQ(static_cast<std::int64_t>(order.size()), tokens);
    Ints sorted = order;
    std::sort(sorted.begin(), sorted.end());
    Ints identity(static_cast<std::size_t>(tokens));
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_EQ(sorted, identity);
    for (std::size_t k = 0; k < order.size(); ++k) {
      EXPECT_EQ(reverse[static_cast<std::size_t>(order[k])], static_cast<std::int64_t>(k));
      EXPECT_EQ(order[static_cast<std::size_t>(reverse[k])], static_cast<std::int64_t>(k));
    }
    // Tokens of each tile are contiguous in tiled order, tile by tile.
    const Ints vbs = variable_block_sizes(latent, tile);
    EXPECT_EQ(std::accumulate(vbs.begin(), vbs.end(), std::int64_t{0}), tokens);
    EXPECT_EQ(static_cast<std::int64_t>(vbs.size()), num_tiles(latent, tile));
  }
}

TEST(Tiling, Wan480pHas624Tiles) {
  const LatentShape latent{21, 30, 52};
  const TileShape tile{4, 4, 4};
  EXPECT_EQ(num_tiles(latent, tile), 6 * 8 * 13);
  EXPECT_EQ(num_tiles(latent, tile), 624);
  const Ints vbs = variable_block_sizes(latent, tile);
  ASSERT_EQ(vbs.size(), 624u);
  EXPECT_EQ(vbs.front(), 64);
  EXPECT_EQ(vbs[12], 64);          // last w tile: 52 = 13 * 4, full
  EXPECT_EQ(vbs[7 * 13], 32);      // last h tile: 30 - 28 = 2 rows
  EXPECT_EQ(vbs[5 * 8 * 13], 16);  // last t tile: 21 - 20 = 1 frame
  EXPECT_EQ(vbs.back(), 1 * 2 * 4);
  EXPECT_EQ(std::accumulate(vbs.begin(), vbs.end(), std::int64_t{0}), 21 * 30 * 52);

  const Ints positions = non_pad_index(vbs, 64);
  ASSERT_EQ(static_cast<std::int64_t>(positions.size()), 21 * 30 * 52);
  EXPECT_TRUE(std::is_sorted(positions.begin(), positions.end()));
  for (std::int64_t p : positions) ASSERT_LT(p % 64, vbs[static_cast<std::size_t>(p / 64)]);
}

// Counts near int64's end, computed without overflow.
TEST(Tiling, CountsAtTheEndOfInt64) {
  const std::int64_t most = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(num_tiles({most, 1, 1}, {2, 1, 1}), std::int64_t{1} << 62);
  EXPECT_EQ(num_tiles({most, 1, 1}, {most, 1, 1}), 1);
  EXPECT_EQ(variable_block_sizes({most, 1, 1}, {most, 1, 1}), (std::vector<std::int64_t>{most}));
  EXPECT_EQ(variable_block_sizes({most, 1, 1}, {most - 1, 1, 1}), (std::vector<std::int64_t>{most - 1, 1}));
  // Positions up to int64's end; no real token, no position.
  EXPECT_EQ(non_pad_index({0, 1}, std::int64_t{1} << 62), (std::vector<std::int64_t>{std::int64_t{1} << 62}));
  EXPECT_EQ(non_pad_index({0, 1}, most), (std::vector<std::int64_t>{most}));
  EXPECT_EQ(non_pad_index({1, 0, 0}, most), (std::vector<std::int64_t>{0}));
}

TEST(Tiling, RejectsBadShapes) {
  auto argument_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      return e.argument();
    }
    return "no error";
  };
  EXPECT_EQ(argument_of([] { num_tiles({0, 4, 4}, {}); }), "latent");
  EXPECT_EQ(argument_of([] { tile_partition_indices({4, 4, 4}, {4, 0, 4}); }), "tile");
  EXPECT_EQ(argument_of([] { variable_block_sizes({4, -1, 4}, {}); }), "latent");
  EXPECT_EQ(argument_of([] { reverse_tile_partition_indices({4, 4, 4}, {-4, 4, 4}); }), "tile");
  // A token count past int64 is refused, not wrapped.
  EXPECT_EQ(argument_of([] { num_tiles({std::int64_t{1} << 22, std::int64_t{1} << 22, std::int64_t{1} << 22}, {}); }),
            "latent");
  EXPECT_EQ(argument_of([] { variable_block_sizes({std::int64_t{1} << 40, std::int64_t{1} << 40, 1}, {}); }),
            "latent");
  EXPECT_EQ(argument_of([] { non_pad_index({64, 65}, 64); }), "vbs");
  EXPECT_EQ(argument_of([] { non_pad_index({-1}, 64); }), "vbs");
  EXPECT_EQ(argument_of([] { non_pad_index({1}, 0); }), "block");
  // A real token's position past int64 is refused, not wrapped (block 2 of
  // 2^62 tokens started at -2^63).
  EXPECT_EQ(argument_of([] { non_pad_index({0, 0, 1}, std::int64_t{1} << 62); }), "block");
  EXPECT_EQ(argument_of([] { non_pad_index({0, 2}, std::numeric_limits<std::int64_t>::max()); }), "block");
}

}  // namespace
}  // namespace vsa::test
