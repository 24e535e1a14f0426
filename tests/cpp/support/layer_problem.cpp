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

MeansProblem::MeansProblem(std::mt19937_64& rng, DType dtype, Layout layout_, int block, int dim, std::int64_t blocks)
    : layout(layout_),
      q(sequence_tensor(dtype, {2, 4, blocks * block, dim, layout_})),
      k(sequence_tensor(dtype, {2, 2, blocks * block, dim, layout_})),
      v(sequence_tensor(dtype, {2, 2, blocks * block, dim, layout_})),
      q_counts(int_vector(DType::i32, mixed_counts(rng, blocks, block))),
      kv_counts(int_vector(DType::i64, mixed_counts(rng, blocks, block))) {
  for (HostTensor* x : {&q, &k, &v}) x->fill_random(rng);
}

std::vector<HostTensor> MeansProblem::poisoned_means() const {
  std::vector<HostTensor> means;
  for (const auto& [x, counts] : {std::pair{&q, &q_counts}, {&k, &kv_counts}, {&v, &kv_counts}}) {
    const std::int64_t heads = x->shape()[layout == Layout::bhsd ? 1 : 2];
    means.emplace_back(DType::f32, std::vector<std::int64_t>{x->shape()[0], heads, counts->numel(), x->shape()[3]});
    means.back().poison();
  }
  return means;
}

std::vector<HostTensor*> MeansProblem::tensors(std::vector<HostTensor>& means) {
  return {&q, &k, &v, &q_counts, &kv_counts, &means[0], &means[1], &means[2]};
}

std::vector<TensorRef> MeansProblem::refs(std::vector<HostTensor>& means) {
  std::vector<TensorRef> r;
  for (const HostTensor* t : tensors(means)) r.push_back(t->ref());
  return r;
}

BlockMeansParams block_means_params(const std::vector<TensorRef>& r, Layout layout) {
  return {{r[0], r[3], r[5], layout, nullptr},
          {r[1], r[4], r[6], layout, nullptr},
          {r[2], r[4], r[7], layout, nullptr}};
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
