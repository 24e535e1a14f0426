// map_to_index, invert_indices, topk_to_index and pack_varlen_index on the
// CPU: hand-computed cases, properties on random maps, and bad inputs.
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

// An int64 id of 2^31 or more would wrap, in int32 lists, into another id
// that the attention op could not tell from a real one.
TEST(TopkToIndex, RefusesIdsThatDoNotFitInt32Lists) {
  const HostTensor topk = int_tensor(DType::i64, {1, 1, 1, 2}, {(std::int64_t{1} << 32) + 5, 3});
  HostTensor idx(DType::i32, {1, 1, 1, 2}), num(DType::i32, {1, 1, 1});
  idx.poison();
  num.poison();
  expect_error_on("topk", [&] { topk_to_index(topk.ref(), idx.ref(), num.ref()); });
  EXPECT_TRUE(idx.untouched());
  EXPECT_TRUE(num.untouched());
  HostTensor wide_idx(DType::i64, {1, 1, 1, 2}), wide_num(DType::i64, {1, 1, 1});
  topk_to_index(topk.ref(), wide_idx.ref(), wide_num.ref());  // int64 lists hold it
  EXPECT_EQ(ints(wide_idx), (std::vector<std::int64_t>{3, (std::int64_t{1} << 32) + 5}));
}

TEST(TopkToIndex, WorksInPlace) {
  HostTensor ids = int_tensor(DType::i32, {1, 1, 2, 4}, {3, 1, 2, 0, 7, 6, 9, 8});
  HostTensor num(DType::i32, {1, 1, 2});
  topk_to_index(ids.ref(), ids.ref(), num.ref());
  EXPECT_EQ(ints(ids), (std::vector<std::int64_t>{0, 1, 2, 3, 6, 7, 8, 9}));
}

// Two sequences in one packed batch, B = 1, H = 2: sequence 0 owns query
// blocks [0, 2) and KV blocks [0, 3), sequence 1 query block 2 and KV blocks
// [3, 5).
TEST(PackVarlenIndex, HandComputed) {
  for (DType cu_dtype : {DType::i32, DType::i64}) {
    const HostTensor cu_q = int_tensor(cu_dtype, {3}, {0, 2, 3});
    const HostTensor cu_kv = int_tensor(cu_dtype, {3}, {0, 3, 5});
    const HostTensor local = int_tensor(DType::i64, {1, 2, 3, 2}, {2, 0, 1, -1, 1, 7,  //
                                                                   0, -1, 2, 1, 0, 1});
    const HostTensor num = int_tensor(DType::i32, {1, 2, 3}, {2, 1, 1, 1, 2, 0});
    HostTensor packed(DType::i32, {1, 2, 3, 2});
    packed.poison();
    pack_varlen_index(local.ref(), num.ref(), cu_q.ref(), cu_kv.ref(), packed.ref());
    // Entries past the count (the 7, the -1s) are never read; they become -1.
    EXPECT_EQ(ints(packed), (std::vector<std::int64_t>{2, 0, 1, -1, 4, -1,  //
                                                       0, -1, 2, 1, -1, -1}));
  }
}

TEST(PackVarlenIndex, InPlaceAndAcrossEmptySequences) {
  // Sequence 1 is empty on both axes, sequence 2 has KV blocks but no queries.
  const HostTensor cu_q = int_tensor(DType::i64, {5}, {0, 1, 1, 1, 3});
  const HostTensor cu_kv = int_tensor(DType::i64, {5}, {0, 2, 2, 4, 5});
  HostTensor ids = int_tensor(DType::i32, {1, 1, 3, 2}, {1, 0, 0, 9, 0, 0});
  const HostTensor num = int_tensor(DType::i32, {1, 1, 3}, {2, 1, 0});
  pack_varlen_index(ids.ref(), num.ref(), cu_q.ref(), cu_kv.ref(), ids.ref());
  EXPECT_EQ(ints(ids), (std::vector<std::int64_t>{1, 0, 4, -1, -1, -1}));
}

TEST(PackVarlenIndex, RandomListsStayInsideTheirSequence) {
  std::mt19937_64 rng(next_seed());
  const std::int64_t b = 2, h = 3, sequences = 5, max_kv = 4;
  std::vector<std::int64_t> cu_q{0}, cu_kv{0};
  for (std::int64_t s = 0; s < sequences; ++s) {
    cu_q.push_back(cu_q.back() + std::uniform_int_distribution<std::int64_t>(0, 4)(rng));
    cu_kv.push_back(cu_kv.back() + std::uniform_int_distribution<std::int64_t>(1, 6)(rng));
  }
  const std::int64_t nq = cu_q.back();
  if (nq == 0) GTEST_SKIP() << "no query blocks drawn";
  HostTensor local(DType::i32, {b, h, nq, max_kv}), num(DType::i64, {b, h, nq});
  std::vector<std::int64_t> sequence_of(static_cast<std::size_t>(nq));
  for (std::int64_t s = 0; s < sequences; ++s)
    for (std::int64_t i = cu_q[s]; i < cu_q[s + 1]; ++i) sequence_of[i] = s;
  for (std::int64_t row = 0; row < b * h * nq; ++row) {
    const std::int64_t s = sequence_of[row % nq];
    num.set_int(row, std::uniform_int_distribution<std::int64_t>(0, max_kv)(rng));
    for (std::int64_t e = 0; e < max_kv; ++e)
      local.set_int(row * max_kv + e,
                    std::uniform_int_distribution<std::int64_t>(0, cu_kv[s + 1] - cu_kv[s] - 1)(rng));
  }
  const HostTensor cu_q_t = int_tensor(DType::i32, {sequences + 1}, cu_q);
  const HostTensor cu_kv_t = int_tensor(DType::i32, {sequences + 1}, cu_kv);
  HostTensor packed(DType::i64, {b, h, nq, max_kv});
  packed.poison();
  pack_varlen_index(local.ref(), num.ref(), cu_q_t.ref(), cu_kv_t.ref(), packed.ref());
  for (std::int64_t row = 0; row < b * h * nq; ++row) {
    const std::int64_t s = sequence_of[row % nq];
    for (std::int64_t e = 0; e < max_kv; ++e) {
      const std::int64_t expected = e < num.get_int(row) ? local.get_int(row * max_kv + e) + cu_kv[s] : -1;
      ASSERT_EQ(packed.get_int(row * max_kv + e), expected) << "row " << row << ", entry " << e;
    }
  }
}

TEST(PackVarlenIndex, RejectsBadOffsetsCountsAndIdsWritingNothing) {
  const HostTensor local = int_tensor(DType::i32, {1, 1, 3, 2}, {0, 1, 2, 0, 0, 1});
  const HostTensor num = int_tensor(DType::i32, {1, 1, 3}, {2, 1, 2});
  const HostTensor cu_q = int_tensor(DType::i32, {3}, {0, 1, 3});
  const HostTensor cu_kv = int_tensor(DType::i32, {3}, {0, 2, 5});
  HostTensor packed(DType::i32, {1, 1, 3, 2});
  packed.poison();
  const auto pack = [&](const HostTensor& l, const HostTensor& n, const HostTensor& q, const HostTensor& kv) {
    pack_varlen_index(l.ref(), n.ref(), q.ref(), kv.ref(), packed.ref());
  };
  // Query block 0 belongs to sequence 0, which has 2 KV blocks: id 2 is outside it.
  const HostTensor escapes = int_tensor(DType::i32, {1, 1, 3, 2}, {0, 2, 2, 0, 0, 1});
  expect_error_on("local_idx", [&] { pack(escapes, num, cu_q, cu_kv); });
  const HostTensor negative = int_tensor(DType::i32, {1, 1, 3, 2}, {0, 1, -1, 0, 0, 1});
  expect_error_on("local_idx", [&] { pack(negative, num, cu_q, cu_kv); });
  expect_error_on("q2k_num", [&] { pack(local, int_tensor(DType::i32, {1, 1, 3}, {2, 3, 0}), cu_q, cu_kv); });
  expect_error_on("cu_q_blocks", [&] { pack(local, num, int_tensor(DType::i32, {3}, {1, 1, 3}), cu_kv); });
  expect_error_on("cu_q_blocks", [&] { pack(local, num, int_tensor(DType::i32, {3}, {0, 1, 2}), cu_kv); });
  expect_error_on("cu_q_blocks", [&] { pack(local, num, int_tensor(DType::i32, {4}, {0, 2, 1, 3}),
                                            int_tensor(DType::i32, {4}, {0, 2, 3, 5})); });
  expect_error_on("cu_kv_blocks", [&] { pack(local, num, cu_q, int_tensor(DType::i32, {3}, {0, 4, 3})); });
  expect_error_on("cu_kv_blocks.shape", [&] { pack(local, num, cu_q, int_tensor(DType::i32, {2}, {0, 5})); });
  expect_error_on("cu_kv_blocks.dtype", [&] { pack(local, num, cu_q, int_tensor(DType::i64, {3}, {0, 2, 5})); });
  expect_error_on("cu_q_blocks.shape", [&] { pack(local, num, int_tensor(DType::i32, {1}, {0}),
                                                  int_tensor(DType::i32, {1}, {0})); });
  expect_error_on("cu_q_blocks", [&] { pack(local, num, HostTensor(DType::i32, {1, 3}), cu_kv); });
  HostTensor wrong_shape(DType::i32, {1, 1, 3, 3});
  expect_error_on("packed_idx.shape",
                  [&] { pack_varlen_index(local.ref(), num.ref(), cu_q.ref(), cu_kv.ref(), wrong_shape.ref()); });
  TensorRef cuda_cu = cu_q.ref();
  cuda_cu.device = Device::cuda;
  expect_error_on("cu_q_blocks.device",
                  [&] { pack_varlen_index(local.ref(), num.ref(), cuda_cu, cu_kv.ref(), packed.ref()); });
  // int64 offsets past 2^31 would wrap the int32 packed ids of sequence 1 into sequence 0's.
  const auto past_int32 = [](std::int64_t second) {
    return int_tensor(DType::i64, {3}, {0, second, second + 3});
  };
  expect_error_on("cu_kv_blocks", [&] {
    pack(local, num, int_tensor(DType::i64, {3}, {0, 1, 3}), past_int32(std::int64_t{1} << 32));
  });
  EXPECT_TRUE(packed.untouched());
  pack(local, num, cu_q, cu_kv);  // the same arguments, valid, do write
  EXPECT_EQ(ints(packed), (std::vector<std::int64_t>{0, 1, 4, -1, 2, 3}));
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
  // Past 2^31 - 1 KV blocks int32 ids wrap. Only the descriptors are large: refused before any read.
  TensorRef huge_map = map.ref, huge_idx = idx.ref();
  huge_map.shape[3] = huge_idx.shape[3] = (std::int64_t{1} << 31) + 1;
  huge_map.stride = huge_idx.stride = {6 * huge_map.shape[3], 3 * huge_map.shape[3], huge_map.shape[3], 1};
  expect_error_on("q2k_idx.dtype", [&] { map_to_index(huge_map, huge_idx, num.ref()); });
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
  // A capacity past 2^31 - 1 entries: int32 counts would wrap. Refused before any read.
  TensorRef huge_k2q = k2q_idx.ref();
  huge_k2q.shape[3] = std::int64_t{1} << 31;
  huge_k2q.stride = {4 * huge_k2q.shape[3], 2 * huge_k2q.shape[3], huge_k2q.shape[3], 1};
  expect_error_on("k2q_num.dtype",
                  [&] { invert_indices(q2k_idx.ref(), q2k_num.ref(), 2, huge_k2q, k2q_num.ref()); });
  EXPECT_TRUE(k2q_idx.untouched());
  EXPECT_TRUE(k2q_num.untouched());

  const HostTensor negative = int_tensor(DType::i32, {1, 1, 1, 2}, {0, -3});
  HostTensor topk_idx(DType::i32, {1, 1, 1, 2}), topk_num(DType::i32, {1, 1, 1});
  topk_idx.poison();
  topk_num.poison();
  expect_error_on("topk", [&] { topk_to_index(negative.ref(), topk_idx.ref(), topk_num.ref()); });
  TensorRef cuda_idx = topk_idx.ref();
  cuda_idx.device = Device::cuda;
  expect_error_on("q2k_idx.device", [&] { topk_to_index(negative.ref(), cuda_idx, topk_num.ref()); });
  // K = 2^31 entries per row: an int32 count of K would wrap to -2^31. Refused before any read.
  const HostTensor ids = int_tensor(DType::i32, {1, 1, 1, 2}, {1, 0});
  TensorRef huge_topk = ids.ref(), huge_topk_idx = topk_idx.ref();
  huge_topk.shape[3] = huge_topk_idx.shape[3] = std::int64_t{1} << 31;
  huge_topk.stride = huge_topk_idx.stride = {huge_topk.shape[3], huge_topk.shape[3], huge_topk.shape[3], 1};
  expect_error_on("q2k_num.dtype", [&] { topk_to_index(huge_topk, huge_topk_idx, topk_num.ref()); });
  EXPECT_TRUE(topk_idx.untouched());
  EXPECT_TRUE(topk_num.untouched());
}

// An output over another tensor of the call is refused before anything is
// read or written (an output that is its input itself, where a function says
// it may be, is accepted: WorksInPlace, InPlaceAndAcrossEmptySequences).
TEST(MetadataRejects, OutputsSharingMemory) {
  BlockMap map(1, 1, 2, 4);
  map.bytes = {1, 0, 1, 0, 0, 1, 1, 1};
  HostTensor idx(DType::i32, {1, 1, 2, 4}), num(DType::i32, {1, 1, 2});
  idx.poison();
  num.poison();
  expect_refused_as_shared("q2k_idx", "q2k_num", {&idx, &num}, [&] {
    map_to_index(map.ref, idx.ref(), TensorRef::contiguous(idx.ref().data, DType::i32, {1, 1, 2}));
  });

  const HostTensor q2k_idx = int_tensor(DType::i32, {1, 1, 2, 2}, {0, 1, 1, -1});
  const HostTensor q2k_num = int_tensor(DType::i32, {1, 1, 2}, {2, 1});
  HostTensor k2q_num(DType::i32, {1, 1, 2});
  k2q_num.poison();
  expect_refused_as_shared("k2q_idx", "q2k_idx", {&q2k_idx, &q2k_num, &k2q_num}, [&] {
    invert_indices(q2k_idx.ref(), q2k_num.ref(), 2, q2k_idx.ref(), k2q_num.ref());
  });

  // int32 lists over int64 ids: each write would land on an id not yet read.
  const HostTensor topk = int_tensor(DType::i64, {1, 1, 2, 4}, {3, 1, 2, 0, 7, 6, 9, 8});
  expect_refused_as_shared("q2k_idx", "topk", {&topk, &num}, [&] {
    topk_to_index(topk.ref(), TensorRef::contiguous(topk.ref().data, DType::i32, {1, 1, 2, 4}), num.ref());
  });
  expect_refused_as_shared("q2k_num", "topk", {&topk, &idx}, [&] {
    topk_to_index(topk.ref(), idx.ref(), TensorRef::contiguous(topk.ref().data, DType::i32, {1, 1, 2}));
  });

  const HostTensor cu_q = int_tensor(DType::i64, {2}, {0, 3}), cu_kv = int_tensor(DType::i64, {2}, {0, 2});
  const HostTensor local = int_tensor(DType::i64, {1, 1, 3, 2}, {1, 0, 0, 9, 0, 0});
  const HostTensor counts = int_tensor(DType::i32, {1, 1, 3}, {2, 1, 0});
  expect_refused_as_shared("packed_idx", "local_idx", {&local, &counts}, [&] {
    pack_varlen_index(local.ref(), counts.ref(), cu_q.ref(), cu_kv.ref(),
                      TensorRef::contiguous(local.ref().data, DType::i32, {1, 1, 3, 2}));
  });
}

}  // namespace
}  // namespace vsa::test
