// map_to_index, invert_indices and topk_to_index on the CPU: hand-computed
// cases, properties on random maps, and bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "support/host_tensor.hpp"
#include "support/test_seed.hpp"

namespace vsa::test {
namespace {

std::vector<std::int64_t> ints(const HostTensor& t) {
  std::vector<std::int64_t> values;
  for (std::int64_t e = 0; e < t.numel(); ++e) values.push_back(t.get_int(e));
  return values;
}

HostTensor int_tensor(DType dtype, std::vector<std::int64_t> shape, const std::vector<std::int64_t>& values) {
  HostTensor t(dtype, std::move(shape));
  for (std::size_t e = 0; e < values.size(); ++e) t.set_int(static_cast<std::int64_t>(e), values[e]);
  return t;
}

// A bool map [B, H, NQ, NK] stored in a test-owned byte buffer.
struct BlockMap {
  std::vector<unsigned char> bytes;
  TensorRef ref;
  BlockMap(std::int64_t b, std::int64_t h, std::int64_t nq, std::int64_t nk)
      : bytes(static_cast<std::size_t>(b * h * nq * nk)) {
    ref = TensorRef::contiguous(bytes.data(), DType::boolean, {b, h, nq, nk});
  }
};

TEST(MapToIndex, HandComputed) {
  for (DType dtype : {DType::i32, DType::i64}) {
    BlockMap map(1, 1, 3, 4);
    const unsigned char rows[] = {0, 1, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1};
    std::copy(std::begin(rows), std::end(rows), map.bytes.begin());
    HostTensor idx(dtype, {1, 1, 3, 4}), num(dtype, {1, 1, 3});
    idx.poison();
    num.poison();
    map_to_index(map.ref, idx.ref(), num.ref());
    EXPECT_EQ(ints(idx), (std::vector<std::int64_t>{1, 3, -1, -1, -1, -1, -1, -1, 0, 1, 2, 3}));
    EXPECT_EQ(ints(num), (std::vector<std::int64_t>{2, 0, 4}));
  }
}

TEST(InvertIndices, HandComputedWithDuplicatesAndPadding) {
  // NQ = 3, NK = 3. Row 0 lists {2, 0}; row 1 lists block 0 twice and 1;
  // row 2 is empty (its entries are garbage that must not be read).
  const HostTensor q2k_idx = int_tensor(DType::i32, {1, 1, 3, 3}, {2, 0, -1, 0, 0, 1, 99, -5, 7});
  const HostTensor q2k_num = int_tensor(DType::i64, {1, 1, 3}, {2, 3, 0});
  HostTensor k2q_idx(DType::i64, {1, 1, 3, 4}), k2q_num(DType::i32, {1, 1, 3});
  k2q_idx.poison();
  k2q_num.poison();
  invert_indices(q2k_idx.ref(), q2k_num.ref(), 3, k2q_idx.ref(), k2q_num.ref());
  EXPECT_EQ(ints(k2q_idx), (std::vector<std::int64_t>{0, 1, 1, -1, 1, -1, -1, -1, 0, -1, -1, -1}));
  EXPECT_EQ(ints(k2q_num), (std::vector<std::int64_t>{3, 1, 1}));
}

TEST(InvertIndices, OverflowIsAnErrorThatWritesNothing) {
  const HostTensor q2k_idx = int_tensor(DType::i32, {1, 1, 3, 1}, {0, 0, 0});
  const HostTensor q2k_num = int_tensor(DType::i32, {1, 1, 3}, {1, 1, 1});
  HostTensor k2q_idx(DType::i32, {1, 1, 2, 2}), k2q_num(DType::i32, {1, 1, 2});
  k2q_idx.poison();
  k2q_num.poison();
  expect_error_on("k2q_idx.shape",
                  [&] { invert_indices(q2k_idx.ref(), q2k_num.ref(), 2, k2q_idx.ref(), k2q_num.ref()); });
  EXPECT_TRUE(k2q_idx.untouched());
  EXPECT_TRUE(k2q_num.untouched());
}

TEST(InvertIndices, RoundTripsRandomMaps) {
  std::mt19937_64 rng(next_seed());
  const std::int64_t b = 2, h = 3, nq = 5, nk = 7;
  BlockMap map(b, h, nq, nk);
  for (auto& byte : map.bytes) byte = static_cast<unsigned char>(rng() % 3 == 0);
  HostTensor q2k_idx(DType::i32, {b, h, nq, nk}), q2k_num(DType::i32, {b, h, nq});
  map_to_index(map.ref, q2k_idx.ref(), q2k_num.ref());
  HostTensor k2q_idx(DType::i32, {b, h, nk, nq}), k2q_num(DType::i64, {b, h, nk});
  invert_indices(q2k_idx.ref(), q2k_num.ref(), nk, k2q_idx.ref(), k2q_num.ref());

  for (std::int64_t bh = 0; bh < b * h; ++bh) {
    for (std::int64_t j = 0; j < nk; ++j) {
      // Exactly the query blocks whose map row marks j, ascending.
      std::vector<std::int64_t> expected;
      for (std::int64_t i = 0; i < nq; ++i)
        if (map.bytes[static_cast<std::size_t>((bh * nq + i) * nk + j)]) expected.push_back(i);
      const std::int64_t count = k2q_num.get_int(bh * nk + j);
      ASSERT_EQ(count, static_cast<std::int64_t>(expected.size()));
      for (std::int64_t e = 0; e < nq; ++e)
        EXPECT_EQ(k2q_idx.get_int((bh * nk + j) * nq + e),
                  e < count ? expected[static_cast<std::size_t>(e)] : -1);
    }
  }
  // Inverting the inverted lists gives the q2k lists back.
  HostTensor again_idx(DType::i32, {b, h, nq, nk}), again_num(DType::i32, {b, h, nq});
  invert_indices(k2q_idx.ref(), k2q_num.ref(), nq, again_idx.ref(), again_num.ref());
  EXPECT_EQ(ints(again_idx), ints(q2k_idx));
  EXPECT_EQ(ints(again_num), ints(q2k_num));
}

TEST(TopkToIndex, SortsEachRowAndFillsTheCount) {
  const HostTensor topk = int_tensor(DType::i64, {1, 2, 1, 3}, {5, 0, 3, 2, 2, 1});
  HostTensor idx(DType::i64, {1, 2, 1, 3}), num(DType::i64, {1, 2, 1});
  topk_to_index(topk.ref(), idx.ref(), num.ref());
  EXPECT_EQ(ints(idx), (std::vector<std::int64_t>{0, 3, 5, 1, 2, 2}));
  EXPECT_EQ(ints(num), (std::vector<std::int64_t>{3, 3}));
}

TEST(TopkToIndex, WorksInPlace) {
  HostTensor ids = int_tensor(DType::i32, {1, 1, 2, 4}, {3, 1, 2, 0, 7, 6, 9, 8});
  HostTensor num(DType::i32, {1, 1, 2});
  topk_to_index(ids.ref(), ids.ref(), num.ref());
  EXPECT_EQ(ints(ids), (std::vector<std::int64_t>{0, 1, 2, 3, 6, 7, 8, 9}));
}

TEST(MetadataRejects, BadArguments) {
  BlockMap map(1, 2, 3, 4);
  HostTensor idx(DType::i32, {1, 2, 3, 4}), num(DType::i32, {1, 2, 3});
  idx.poison();
  num.poison();
  TensorRef not_bool = map.ref;
  not_bool.dtype = DType::i32;
  expect_error_on("block_map.dtype", [&] { map_to_index(not_bool, idx.ref(), num.ref()); });
  TensorRef rank3 = map.ref;
  rank3.rank = 3;
  expect_error_on("block_map", [&] { map_to_index(rank3, idx.ref(), num.ref()); });
  TensorRef short_idx = idx.ref();
  short_idx.shape[3] = 3;
  expect_error_on("q2k_idx.stride", [&] { map_to_index(map.ref, short_idx, num.ref()); });
  const HostTensor narrow_idx(DType::i32, {1, 2, 3, 3});
  expect_error_on("q2k_idx.shape", [&] { map_to_index(map.ref, narrow_idx.ref(), num.ref()); });
  TensorRef float_num = num.ref();
  float_num.dtype = DType::f32;
  expect_error_on("q2k_num.dtype", [&] { map_to_index(map.ref, idx.ref(), float_num); });
  const HostTensor wide_num(DType::i64, {1, 2, 3});
  expect_error_on("q2k_num.dtype", [&] { map_to_index(map.ref, idx.ref(), wide_num.ref()); });
  TensorRef cuda_num = num.ref();
  cuda_num.device = Device::cuda;
  expect_error_on("q2k_num.device", [&] { map_to_index(map.ref, idx.ref(), cuda_num); });
  expect_error_on("q2k_idx", [&] { map_to_index(map.ref, TensorRef{}, num.ref()); });
  EXPECT_TRUE(idx.untouched());
  EXPECT_TRUE(num.untouched());

  const HostTensor q2k_idx = int_tensor(DType::i32, {1, 1, 2, 2}, {0, 1, 1, 5});
  const HostTensor q2k_num = int_tensor(DType::i32, {1, 1, 2}, {2, 1});
  HostTensor k2q_idx(DType::i32, {1, 1, 2, 2}), k2q_num(DType::i32, {1, 1, 2});
  k2q_idx.poison();
  k2q_num.poison();
  expect_error_on("num_kv_blocks",
                  [&] { invert_indices(q2k_idx.ref(), q2k_num.ref(), 0, k2q_idx.ref(), k2q_num.ref()); });
  expect_error_on("k2q_idx.shape",
                  [&] { invert_indices(q2k_idx.ref(), q2k_num.ref(), 3, k2q_idx.ref(), k2q_num.ref()); });
  const HostTensor short_num(DType::i32, {1, 1, 1});
  expect_error_on("k2q_num.shape",
                  [&] { invert_indices(q2k_idx.ref(), q2k_num.ref(), 2, k2q_idx.ref(), short_num.ref()); });
  const HostTensor too_many = int_tensor(DType::i32, {1, 1, 2}, {2, 3});
  expect_error_on("q2k_num",
                  [&] { invert_indices(q2k_idx.ref(), too_many.ref(), 2, k2q_idx.ref(), k2q_num.ref()); });
  const HostTensor out_of_range = int_tensor(DType::i32, {1, 1, 2, 2}, {0, 1, 2, 0});
  expect_error_on(
      "q2k_idx", [&] { invert_indices(out_of_range.ref(), q2k_num.ref(), 2, k2q_idx.ref(), k2q_num.ref()); });
  EXPECT_TRUE(k2q_idx.untouched());
  EXPECT_TRUE(k2q_num.untouched());

  const HostTensor negative = int_tensor(DType::i32, {1, 1, 1, 2}, {0, -3});
  HostTensor topk_idx(DType::i32, {1, 1, 1, 2}), topk_num(DType::i32, {1, 1, 1});
  topk_idx.poison();
  expect_error_on("topk", [&] { topk_to_index(negative.ref(), topk_idx.ref(), topk_num.ref()); });
  TensorRef cuda_idx = topk_idx.ref();
  cuda_idx.device = Device::cuda;
  expect_error_on("q2k_idx.device", [&] { topk_to_index(negative.ref(), cuda_idx, topk_num.ref()); });
  EXPECT_TRUE(topk_idx.untouched());
}

}  // namespace
}  // namespace vsa::test
