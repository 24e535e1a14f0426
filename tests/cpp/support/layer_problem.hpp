// Inputs of the VSA layer's stages for the CPU and GPU tests: q/k/v-shaped
// tensors in either layout, valid-count vectors with empty, single-token and
// full blocks, and float32 block tensors.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "support/host_tensor.hpp"
#include "support/test_seed.hpp"
#include "vsa/layer.hpp"

namespace vsa::test {

struct SequenceShape {
  std::int64_t batch, heads, seq, dim;
  Layout layout = Layout::bhsd;
};

// [B, H, S, D] (bhsd) or [B, S, H, D] (bshd), contiguous.
HostTensor sequence_tensor(DType dtype, const SequenceShape& s);
// Flat index of logical element (b, h, t, d) of a sequence tensor.
std::int64_t sequence_index(const HostTensor& t, Layout layout, std::int64_t b, std::int64_t h,
                            std::int64_t token, std::int64_t d);

// A contiguous int32/int64 vector holding `values`.
HostTensor int_vector(DType dtype, const std::vector<std::int64_t>& values);
// Values of a contiguous int tensor.
std::vector<std::int64_t> int_values(const HostTensor& t);

// `blocks` counts in [0, block]: the last block empty, the first full and
// the middle one a single token (as far as there are blocks), the rest random.
std::vector<std::int64_t> mixed_counts(std::mt19937_64& rng, std::int64_t blocks, std::int64_t block);

// A random float32 tensor of the given shape (values in [-1, 1]).
HostTensor random_f32(std::mt19937_64& rng, std::vector<std::int64_t> shape);

// block_means' inputs for one BlockCase: q with twice k's and v's heads, all
// random; q's counts int32, k and v's int64 (mixed_counts).
struct MeansProblem {
  MeansProblem(std::mt19937_64& rng, DType dtype, Layout layout, int block, int dim, std::int64_t blocks);
  Layout layout;
  HostTensor q, k, v, q_counts, kv_counts;
  // Poisoned float32 means for q, k and v, in that order.
  std::vector<HostTensor> poisoned_means() const;
  // q, k, v, their counts and the given means: the order block_means_params takes refs in.
  std::vector<HostTensor*> tensors(std::vector<HostTensor>& means);
  // Their refs, in the same order.
  std::vector<TensorRef> refs(std::vector<HostTensor>& means);
};
// block_means' parameters over refs of q, k, v, q_counts, kv_counts, q_mean, k_mean and v_mean.
BlockMeansParams block_means_params(const std::vector<TensorRef>& refs, Layout layout);

// Parameters of the per-tensor stages' suites, and their test names
// ("bf16_bshd_blk128_d64").
using BlockCase = std::tuple<DType, Layout, int /*block*/, int /*dim*/>;
using CombineCase = std::tuple<DType, Layout, int /*block*/>;
std::string block_case_name(const ::testing::TestParamInfo<BlockCase>& info);
std::string combine_case_name(const ::testing::TestParamInfo<CombineCase>& info);

}  // namespace vsa::test
