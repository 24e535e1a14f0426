#include "support/layer_problem.hpp"

#include <algorithm>
#include <utility>

namespace vsa::test {

HostTensor sequence_tensor(DType dtype, const SequenceShape& s) {
  return s.layout == Layout::bhsd ? HostTensor(dtype, {s.batch, s.heads, s.seq, s.dim})
                                  : HostTensor(dtype, {s.batch, s.seq, s.heads, s.dim});
}

std::int64_t sequence_index(const HostTensor& t, Layout layout, std::int64_t b, std::int64_t h,
                            std::int64_t token, std::int64_t d) {
  return layout == Layout::bhsd ? t.flat_index(b, h, token, d) : t.flat_index(b, token, h, d);
}

HostTensor int_vector(DType dtype, const std::vector<std::int64_t>& values) {
  HostTensor t(dtype, {static_cast<std::int64_t>(values.size())});
  for (std::size_t i = 0; i < values.size(); ++i) t.set_int(static_cast<std::int64_t>(i), values[i]);
  return t;
}

std::vector<std::int64_t> int_values(const HostTensor& t) {
  std::vector<std::int64_t> values;
  for (std::int64_t i = 0; i < t.numel(); ++i) values.push_back(t.get_int(i));
  return values;
}

std::vector<std::int64_t> mixed_counts(std::mt19937_64& rng, std::int64_t blocks, std::int64_t block) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(blocks));
  std::uniform_int_distribution<std::int64_t> count(0, block);
  for (auto& c : counts) c = count(rng);
  // The last block empty, the first full, the middle one a single token.
  const std::int64_t where[] = {blocks - 1, 0, blocks / 2}, fixed[] = {0, block, 1};
  for (std::int64_t i = 0; i < std::min<std::int64_t>(blocks, 3); ++i)
    counts[static_cast<std::size_t>(where[i])] = fixed[i];
  return counts;
}

HostTensor random_f32(std::mt19937_64& rng, std::vector<std::int64_t> shape) {
  HostTensor t(DType::f32, std::move(shape));
  t.fill_random(rng);
  return t;
}

namespace {

std::string case_prefix(DType dtype, Layout layout, int block) {
  const char* tag = dtype == DType::bf16 ? "bf16" : dtype == DType::f16 ? "f16" : "f32";
  return std::string(tag) + (layout == Layout::bhsd ? "_bhsd" : "_bshd") + "_blk" + std::to_string(block);
}

}  // namespace

std::string block_case_name(const ::testing::TestParamInfo<BlockCase>& info) {
  const auto [dtype, layout, block, dim] = info.param;
  return case_prefix(dtype, layout, block) + "_d" + std::to_string(dim);
}

std::string combine_case_name(const ::testing::TestParamInfo<CombineCase>& info) {
  const auto [dtype, layout, block] = info.param;
  return case_prefix(dtype, layout, block);
}

}  // namespace vsa::test
