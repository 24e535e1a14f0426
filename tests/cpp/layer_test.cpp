// The VSA layer's stages on the CPU (vsa/layer.hpp) against float64
// computations written here: block means over valid tokens (pad tokens never
// read), the coarse stage's softmax output and block lists (ties, empty KV
// blocks, top-k = 1 and = NK, GQA), the gate combine, the gradients of the
// means, the coarse stage and the combine, and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "support/expect_error.hpp"
#include "support/host_tensor.hpp"
#include "support/layer_problem.hpp"

namespace vsa::test {
namespace {

// A value no valid token holds: were a pad token read, the mean would move
// by hundreds.
constexpr double kPadValue = 30000.0;

// ---- block means ---------------------------------------------------------------------------------

class BlockMean : public ::testing::TestWithParam<BlockCase> {};

TEST_P(BlockMean, IsTheFloat64MeanOfTheValidTokensRoundedOnce) {
  const auto [dtype, layout, block, dim] = GetParam();
  std::mt19937_64 rng(next_seed());
  const std::int64_t blocks = 5;
  const SequenceShape shape{2, 3, blocks * block, dim, layout};
  HostTensor x = sequence_tensor(dtype, shape);
  x.fill_random(rng);
  const std::vector<std::int64_t> counts = mixed_counts(rng, blocks, block);
  for (std::int64_t b = 0; b < shape.batch; ++b)
    for (std::int64_t h = 0; h < shape.heads; ++h)
      for (std::int64_t n = 0; n < blocks; ++n)
        for (std::int64_t t = counts[n]; t < block; ++t)
          for (std::int64_t d = 0; d < dim; ++d) x.set(sequence_index(x, layout, b, h, n * block + t, d), kPadValue);
  const HostTensor valid = int_vector(DType::i64, counts);
  HostTensor mean(DType::f32, {shape.batch, shape.heads, blocks, dim});
  mean.poison();

  block_mean({x.ref(), valid.ref(), mean.ref(), layout, nullptr});

  EXPECT_TRUE(mean.written_exactly_view());
  for (std::int64_t b = 0; b < shape.batch; ++b)
    for (std::int64_t h = 0; h < shape.heads; ++h)
      for (std::int64_t n = 0; n < blocks; ++n)
        for (std::int64_t d = 0; d < dim; ++d) {
          double sum = 0.0;
          for (std::int64_t t = 0; t < counts[n]; ++t) sum += x.get(sequence_index(x, layout, b, h, n * block + t, d));
          const float want = counts[n] ? static_cast<float>(sum / static_cast<double>(counts[n])) : 0.0f;
          ASSERT_EQ(mean.get(mean.flat_index(b, h, n, d)), want) << "block " << n << " count " << counts[n];
        }
}

TEST_P(BlockMean, ThreeInOneCallAreEachBlockMeanBitForBit) {
  const auto [dtype, layout, block, dim] = GetParam();
  std::mt19937_64 rng(next_seed());
  MeansProblem p(rng, dtype, layout, block, dim, 4);
  std::vector<HostTensor> got = p.poisoned_means(), want = p.poisoned_means();

  block_means(block_means_params(p.refs(got), layout));
  const BlockMeansParams each = block_means_params(p.refs(want), layout);
  for (const BlockMeanParams* part : {&each.q, &each.k, &each.v}) block_mean(*part);

  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(got[i].written_exactly_view()) << "part " << i;
    EXPECT_TRUE(got[i].same_bytes(want[i])) << "part " << i;
  }
}

TEST_P(BlockMean, GradientIsSpreadOverTheValidTokens) {
  const auto [dtype, layout, block, dim] = GetParam();
  std::mt19937_64 rng(next_seed());
  const std::int64_t blocks = 4;
  const SequenceShape shape{1, 2, blocks * block, dim, layout};
  const std::vector<std::int64_t> counts = mixed_counts(rng, blocks, block);
  const HostTensor valid = int_vector(DType::i32, counts);
  const HostTensor dmean = random_f32(rng, {shape.batch, shape.heads, blocks, dim});
  HostTensor dx = sequence_tensor(dtype, shape);
  dx.poison();

  block_mean_backward({dmean.ref(), valid.ref(), dx.ref(), layout, nullptr});

  EXPECT_TRUE(dx.written_exactly_view());
  std::vector<double> got, want;
  for (std::int64_t h = 0; h < shape.heads; ++h)
    for (std::int64_t n = 0; n < blocks; ++n)
      for (std::int64_t t = 0; t < block; ++t)
        for (std::int64_t d = 0; d < dim; ++d) {
          const double value = dx.get(sequence_index(dx, layout, 0, h, n * block + t, d));
          if (t >= counts[n]) {
            ASSERT_EQ(value, 0.0) << "pad token " << t << " of block " << n;
            continue;
          }
          got.push_back(value);
          want.push_back(dmean.get(dmean.flat_index(0, h, n, d)) / static_cast<double>(counts[n]));
        }
  EXPECT_LE(relative_error(got, want), dtype == DType::f32 ? 1e-7 : 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Cases, BlockMean,
                         ::testing::Combine(::testing::Values(DType::bf16, DType::f16, DType::f32),
                                            ::testing::Values(Layout::bhsd, Layout::bshd),
                                            ::testing::Values(64, 128), ::testing::Values(64, 128)),
                         block_case_name);

// ---- coarse stage --------------------------------------------------------------------------------

struct CoarseProblem {
  std::int64_t batch = 2, heads = 4, kv_heads = 2, nq = 5, nk = 9, dim = 64, topk = 3;
  DType index_dtype = DType::i32;
  std::vector<std::int64_t> vbs;  // empty: mixed counts of 64-token blocks
  HostTensor q_mean, k_mean, v_mean, valid, coarse, idx, num;

  void build(std::mt19937_64& rng) {
    q_mean = random_f32(rng, {batch, heads, nq, dim});
    k_mean = random_f32(rng, {batch, kv_heads, nk, dim});
    v_mean = random_f32(rng, {batch, kv_heads, nk, dim});
    if (vbs.empty()) vbs = mixed_counts(rng, nk, 64);
    valid = int_vector(DType::i64, vbs);
    allocate_outputs();
  }
  void allocate_outputs() {
    coarse = HostTensor(DType::f32, {batch, heads, nq, dim});
    idx = HostTensor(index_dtype, {batch, heads, nq, topk});
    num = HostTensor(index_dtype, {batch, heads, nq});
    coarse.poison();
    idx.poison();
    num.poison();
  }
  CoarseStageParams params() const {
    CoarseStageParams p;
    p.q_mean = q_mean.ref();
    p.k_mean = k_mean.ref();
    p.v_mean = v_mean.ref();
    p.variable_block_sizes = valid.ref();
    p.coarse_out = coarse.ref();
    p.q2k_idx = idx.ref();
    p.q2k_num = num.ref();
    return p;
  }
  std::vector<std::int64_t> live() const {
    std::vector<std::int64_t> ids;
    for (std::int64_t j = 0; j < nk; ++j)
      if (vbs[j] > 0) ids.push_back(j);
    return ids;
  }
  // Row r = ((b * heads + h) * nq + i): its KV head's mean tensors start here.
  std::int64_t kv_row0(std::int64_t r) const {
    const std::int64_t bh = r / nq;
    return ((bh / heads) * kv_heads + (bh % heads) / (heads / kv_heads)) * nk;
  }
  std::vector<std::int64_t> listed(std::int64_t r) const {
    std::vector<std::int64_t> ids;
    for (std::int64_t e = 0; e < num.get_int(r); ++e) ids.push_back(idx.get_int(r * topk + e));
    return ids;
  }
};

// Scores of row r against every KV block, in float64.
std::vector<double> reference_scores(const CoarseProblem& p, std::int64_t r) {
  std::vector<double> scores(static_cast<std::size_t>(p.nk));
  for (std::int64_t j = 0; j < p.nk; ++j)
    for (std::int64_t d = 0; d < p.dim; ++d)
      scores[j] += p.q_mean.get(r * p.dim + d) * p.k_mean.get((p.kv_row0(r) + j) * p.dim + d);
  return scores;
}

// The live blocks by descending score, ties to the lower id.
std::vector<std::int64_t> ranked(const CoarseProblem& p, const std::vector<double>& scores) {
  std::vector<std::int64_t> ids = p.live();
  std::stable_sort(ids.begin(), ids.end(), [&](std::int64_t a, std::int64_t b) { return scores[a] > scores[b]; });
  return ids;
}

void expect_lists_well_formed(const CoarseProblem& p) {
  const auto take = std::min<std::int64_t>(p.topk, static_cast<std::int64_t>(p.live().size()));
  for (std::int64_t r = 0; r < p.batch * p.heads * p.nq; ++r) {
    ASSERT_EQ(p.num.get_int(r), take) << "row " << r;
    for (std::int64_t e = take; e < p.topk; ++e) ASSERT_EQ(p.idx.get_int(r * p.topk + e), -1);
  }
}

TEST(CoarseStage, MatchesFloat64SoftmaxAndTopK) {
  for (const auto& [kv_heads, dim, topk] : {std::tuple{2, 64, 3}, std::tuple{1, 128, 1}, std::tuple{4, 64, 5}}) {
    std::mt19937_64 rng(next_seed());
    CoarseProblem p;
    p.kv_heads = kv_heads;
    p.dim = dim;
    p.topk = topk;
    p.index_dtype = kv_heads == 1 ? DType::i64 : DType::i32;
    p.build(rng);
    const double scale = 0.3;
    CoarseStageParams params = p.params();
    params.scale = static_cast<float>(scale);
    coarse_stage(params);

    EXPECT_TRUE(p.coarse.written_exactly_view());
    expect_lists_well_formed(p);
    std::vector<double> got, want;
    int compared = 0;
    for (std::int64_t r = 0; r < p.batch * p.heads * p.nq; ++r) {
      const std::vector<double> scores = reference_scores(p, r);
      const std::vector<std::int64_t> order = ranked(p, scores);
      const auto take = static_cast<std::size_t>(p.num.get_int(r));
      // Lists are compared where float32 rounding cannot swap the boundary.
      if (take == order.size() || scores[order[take - 1]] - scores[order[take]] > 1e-3) {
        std::vector<std::int64_t> expected(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(take));
        std::sort(expected.begin(), expected.end());
        EXPECT_EQ(p.listed(r), expected) << "row " << r;
        ++compared;
      }
      double top = -INFINITY, total = 0.0;
      for (std::int64_t j : order) top = std::max(top, scores[j]);
      std::vector<double> out(static_cast<std::size_t>(p.dim), 0.0);
      for (std::int64_t j : order) {
        const double w = std::exp((scores[j] - top) * scale);
        total += w;
        for (std::int64_t d = 0; d < p.dim; ++d) out[d] += w * p.v_mean.get((p.kv_row0(r) + j) * p.dim + d);
      }
      for (std::int64_t d = 0; d < p.dim; ++d) {
        got.push_back(p.coarse.get(r * p.dim + d));
        want.push_back(out[d] / total);
      }
    }
    EXPECT_GT(compared, p.batch * p.heads * p.nq / 2);
    EXPECT_LE(relative_error(got, want), 1e-5);
  }
}

TEST(CoarseStage, TiesGoToTheLowerBlockId) {
  std::mt19937_64 rng(next_seed());
  CoarseProblem p;
  p.nk = 10;
  p.topk = 4;
  p.vbs = {64, 64, 0, 64, 64, 64, 64, 64, 64, 64};
  p.build(rng);
  // Blocks 7 and 8 are twice block 0 (a larger score for a row with a
  // positive score against block 0); every other block equals block 0, so
  // their scores tie bit for bit.
  for (std::int64_t r = 0; r < p.batch * p.kv_heads * p.nk; ++r) {
    const std::int64_t j = r % p.nk, first = r - j;
    for (std::int64_t d = 0; d < p.dim; ++d) {
      const double base = p.k_mean.get(first * p.dim + d);
      p.k_mean.set(r * p.dim + d, (j == 7 || j == 8) ? 2.0 * base : base);
    }
  }
  coarse_stage(p.params());
  expect_lists_well_formed(p);
  for (std::int64_t r = 0; r < p.batch * p.heads * p.nq; ++r) {
    const bool positive = reference_scores(p, r)[0] > 0.0;
    // Dead block 2 is never listed; the lowest live ids win the ties.
    EXPECT_EQ(p.listed(r), positive ? (std::vector<std::int64_t>{0, 1, 7, 8})
                                     : (std::vector<std::int64_t>{0, 1, 3, 4}))
        << "row " << r;
  }
}

// Scaling a head's query means by 2^-s and its key means by 2^s leaves every score
// q·k as it was, so the lists and the output must be the same bits, wherever in
// float32's range the means sit (key means near 2^120 once overflowed the ranks to
// inf: the output was NaN and ties went to the lower ids).
TEST(CoarseStage, MeansFarApartInRangeGiveTheSameListsAndOutput) {
  std::mt19937_64 rng(next_seed());
  CoarseProblem base;
  base.nk = 40;
  base.topk = 7;
  base.build(rng);
  coarse_stage(base.params());
  for (const int shift : {120, 60, -60, -100}) {
    CoarseProblem p = base;
    p.allocate_outputs();
    for (std::int64_t i = 0; i < p.q_mean.numel(); ++i) p.q_mean.set(i, std::ldexp(base.q_mean.get(i), -shift));
    for (std::int64_t i = 0; i < p.k_mean.numel(); ++i) p.k_mean.set(i, std::ldexp(base.k_mean.get(i), shift));
    coarse_stage(p.params());
    for (std::int64_t r = 0; r < p.batch * p.heads * p.nq; ++r)
      ASSERT_EQ(p.listed(r), base.listed(r)) << "row " << r << " at " << shift;
    for (std::int64_t e = 0; e < p.coarse.numel(); ++e)
      ASSERT_EQ(p.coarse.get(e), base.coarse.get(e)) << "element " << e << " at " << shift;
  }
}

TEST(CoarseStage, TopKOfNkListsEveryLiveBlock) {
  std::mt19937_64 rng(next_seed());
  CoarseProblem p;
  p.nk = 6;
  p.topk = 6;
  p.vbs = {64, 0, 17, 64, 0, 1};
  p.build(rng);
  coarse_stage(p.params());
  expect_lists_well_formed(p);
  for (std::int64_t r = 0; r < p.batch * p.heads * p.nq; ++r)
    EXPECT_EQ(p.listed(r), (std::vector<std::int64_t>{0, 2, 3, 5}));
}

TEST(CoarseStage, NoLiveBlockGivesEmptyListsAndZeroOutput) {
  std::mt19937_64 rng(next_seed());
  CoarseProblem p;
  p.vbs.assign(9, 0);
  p.build(rng);
  coarse_stage(p.params());
  expect_lists_well_formed(p);
  for (std::int64_t e = 0; e < p.coarse.numel(); ++e) ASSERT_EQ(p.coarse.get(e), 0.0);
}

// ---- coarse stage backward -----------------------------------------------------------------------

std::vector<double> values(const HostTensor& t) {
  std::vector<double> out;
  for (std::int64_t i = 0; i < t.numel(); ++i) out.push_back(t.get(i));
  return out;
}

// The coarse stage's loss Σ dcoarse · coarse in float64 from the means as
// they are, over the rows of one KV head (its group's query heads), and its
// gradients by central differences.
struct CoarseLoss {
  const CoarseProblem& p;
  double scale;
  std::vector<double> q, k, v, dcoarse;

  double of_head(std::int64_t bkv) const {
    const std::int64_t rows = p.heads / p.kv_heads * p.nq, dim = p.dim;
    double loss = 0.0;
    std::vector<double> scores(static_cast<std::size_t>(p.nk));
    for (std::int64_t r = bkv * rows; r < (bkv + 1) * rows; ++r) {
      double top = -INFINITY, total = 0.0;
      for (std::int64_t j : p.live()) {
        scores[j] = 0.0;
        for (std::int64_t d = 0; d < dim; ++d) scores[j] += q[r * dim + d] * k[(bkv * p.nk + j) * dim + d];
        top = std::max(top, scores[j] * scale);
      }
      std::vector<double> out(static_cast<std::size_t>(dim), 0.0);
      for (std::int64_t j : p.live()) {
        const double w = std::exp(scores[j] * scale - top);
        total += w;
        for (std::int64_t d = 0; d < dim; ++d) out[d] += w * v[(bkv * p.nk + j) * dim + d];
      }
      for (std::int64_t d = 0; d < dim; ++d)
        if (total > 0.0) loss += dcoarse[r * dim + d] * out[d] / total;
    }
    return loss;
  }

  // d loss / d x[i], x one of q, k, v, `per_head` of its rows to a KV head.
  std::vector<double> gradient(std::vector<double>& x, std::int64_t per_head) const {
    std::vector<double> grad;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::int64_t bkv = static_cast<std::int64_t>(i) / (per_head * p.dim);
      const double value = x[i], step = 1e-5 * std::max(1.0, std::fabs(value));
      x[i] = value + step;
      const double up = of_head(bkv);
      x[i] = value - step;
      const double down = of_head(bkv);
      x[i] = value;
      grad.push_back((up - down) / (2.0 * step));
    }
    return grad;
  }
};

TEST(CoarseStageBackward, MatchesFiniteDifferencesOfTheFloat64Forward) {
  for (const auto& [kv_heads, dim, scale] : {std::tuple{2, 64, 0.3}, std::tuple{1, 128, 0.0}, std::tuple{4, 64, 0.5}}) {
    std::mt19937_64 rng(next_seed());
    CoarseProblem p;
    p.kv_heads = kv_heads;
    p.dim = dim;
    p.build(rng);
    CoarseStageParams forward = p.params();
    forward.scale = static_cast<float>(scale);
    coarse_stage(forward);
    const HostTensor dcoarse = random_f32(rng, {p.batch, p.heads, p.nq, p.dim});
    HostTensor dq(DType::f32, {p.batch, p.heads, p.nq, p.dim}), dk(DType::f32, {p.batch, p.kv_heads, p.nk, p.dim}),
        dv(DType::f32, {p.batch, p.kv_heads, p.nk, p.dim});
    for (HostTensor* t : {&dq, &dk, &dv}) t->poison();
    CoarseStageBackwardParams params{p.q_mean.ref(), p.k_mean.ref(),  p.v_mean.ref(), p.valid.ref(),
                                     forward.scale,  p.coarse.ref(),  dcoarse.ref(),  dq.ref(),
                                     dk.ref(),       dv.ref()};
    EXPECT_EQ(coarse_stage_backward_workspace_bytes(params), 0u);  // the CPU takes its own scratch
    coarse_stage_backward(params);

    CoarseLoss loss{p, scale != 0.0 ? scale : 1.0 / std::sqrt(static_cast<double>(dim)), values(p.q_mean),
                    values(p.k_mean), values(p.v_mean), values(dcoarse)};
    const std::int64_t group_rows = p.heads / p.kv_heads * p.nq;
    EXPECT_LE(relative_error(values(dq), loss.gradient(loss.q, group_rows)), 1e-6);
    EXPECT_LE(relative_error(values(dk), loss.gradient(loss.k, p.nk)), 1e-6);
    EXPECT_LE(relative_error(values(dv), loss.gradient(loss.v, p.nk)), 1e-6);
  }
}

TEST(CoarseStageBackward, NoLiveBlockGivesZeroGradients) {
  std::mt19937_64 rng(next_seed());
  CoarseProblem p;
  p.vbs.assign(static_cast<std::size_t>(p.nk), 0);
  p.build(rng);
  coarse_stage(p.params());
  const HostTensor dcoarse = random_f32(rng, {p.batch, p.heads, p.nq, p.dim});
  HostTensor dq(DType::f32, {p.batch, p.heads, p.nq, p.dim}), dk(DType::f32, {p.batch, p.kv_heads, p.nk, p.dim}),
      dv(DType::f32, {p.batch, p.kv_heads, p.nk, p.dim});
  for (HostTensor* t : {&dq, &dk, &dv}) t->poison();
  coarse_stage_backward({p.q_mean.ref(), p.k_mean.ref(), p.v_mean.ref(), p.valid.ref(), 0.0f, p.coarse.ref(),
                         dcoarse.ref(), dq.ref(), dk.ref(), dv.ref()});
  for (const HostTensor* t : {&dq, &dk, &dv})
    for (std::int64_t i = 0; i < t->numel(); ++i) ASSERT_EQ(t->get(i), 0.0) << "flat " << i;
}

// ---- gate combine --------------------------------------------------------------------------------

struct CombineProblem {
  DType dtype;
  Layout layout;
  std::int64_t block, blocks = 3;
  SequenceShape shape;
  HostTensor fine, gate, coarse;

  CombineProblem(std::mt19937_64& rng, DType d, Layout l, std::int64_t blk)
      : dtype(d), layout(l), block(blk), shape{2, 3, blocks * blk, 64, l} {
    fine = sequence_tensor(dtype, shape);
    gate = sequence_tensor(dtype, shape);
    fine.fill_random(rng);
    gate.fill_random(rng);
    coarse = random_f32(rng, {shape.batch, shape.heads, blocks, shape.dim});
  }
  double coarse_at(std::int64_t b, std::int64_t h, std::int64_t t, std::int64_t d) const {
    return coarse.get(coarse.flat_index(b, h, t / block, d));
  }
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (std::int64_t b = 0; b < shape.batch; ++b)
      for (std::int64_t h = 0; h < shape.heads; ++h)
        for (std::int64_t t = 0; t < shape.seq; ++t)
          for (std::int64_t d = 0; d < shape.dim; ++d) fn(b, h, t, d, sequence_index(fine, layout, b, h, t, d));
  }
};

class GateCombine : public ::testing::TestWithParam<CombineCase> {};

TEST_P(GateCombine, AddsTheBroadcastCoarseOutputTimesTheGate) {
  const auto [dtype, layout, block] = GetParam();
  std::mt19937_64 rng(next_seed());
  const CombineProblem p(rng, dtype, layout, block);
  const double tol = dtype == DType::f32 ? 1e-6 : 1e-2;
  for (const bool gated : {true, false}) {
    HostTensor out = sequence_tensor(dtype, p.shape);
    out.poison();
    gate_combine({p.fine.ref(), p.coarse.ref(), gated ? p.gate.ref() : TensorRef{}, out.ref(), layout, nullptr});
    EXPECT_TRUE(out.written_exactly_view());
    std::vector<double> got, want;
    p.for_each([&](auto b, auto h, auto t, auto d, std::int64_t at) {
      got.push_back(out.get(at));
      want.push_back(p.fine.get(at) + p.coarse_at(b, h, t, d) * (gated ? p.gate.get(at) : 1.0));
    });
    EXPECT_LE(relative_error(got, want), tol) << (gated ? "gated" : "no gate");
  }
  // In place: out is fine itself.
  HostTensor fine = p.fine;
  gate_combine({fine.ref(), p.coarse.ref(), p.gate.ref(), fine.ref(), layout, nullptr});
  std::vector<double> got, want;
  p.for_each([&](auto b, auto h, auto t, auto d, std::int64_t at) {
    got.push_back(fine.get(at));
    want.push_back(p.fine.get(at) + p.coarse_at(b, h, t, d) * p.gate.get(at));
  });
  EXPECT_LE(relative_error(got, want), tol) << "in place";
}

TEST_P(GateCombine, GradientsOfCoarseAndGate) {
  const auto [dtype, layout, block] = GetParam();
  std::mt19937_64 rng(next_seed());
  const CombineProblem p(rng, dtype, layout, block);
  const HostTensor& dout = p.fine;  // any q-shaped tensor serves as the incoming gradient
  for (const bool gated : {true, false}) {
    HostTensor dcoarse(DType::f32, {p.shape.batch, p.shape.heads, p.blocks, p.shape.dim});
    HostTensor dgate = sequence_tensor(dtype, p.shape);
    dcoarse.poison();
    dgate.poison();
    gate_combine_backward({dout.ref(), p.coarse.ref(), gated ? p.gate.ref() : TensorRef{}, dcoarse.ref(),
                           gated ? dgate.ref() : TensorRef{}, layout, nullptr});
    EXPECT_TRUE(dcoarse.written_exactly_view());
    EXPECT_TRUE(gated ? dgate.written_exactly_view() : dgate.untouched());
    std::vector<double> sums(static_cast<std::size_t>(dcoarse.numel()), 0.0), got_gate, want_gate;
    p.for_each([&](auto b, auto h, auto t, auto d, std::int64_t at) {
      sums[dcoarse.flat_index(b, h, t / block, d)] += dout.get(at) * (gated ? p.gate.get(at) : 1.0);
      if (gated) {
        got_gate.push_back(dgate.get(at));
        want_gate.push_back(dout.get(at) * p.coarse_at(b, h, t, d));
      }
    });
    std::vector<double> got(sums.size());
    for (std::size_t i = 0; i < got.size(); ++i) got[i] = dcoarse.get(static_cast<std::int64_t>(i));
    EXPECT_LE(relative_error(got, sums), 1e-5);
    if (gated) {
      EXPECT_LE(relative_error(got_gate, want_gate), dtype == DType::f32 ? 1e-6 : 1e-2);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GateCombine,
                         ::testing::Combine(::testing::Values(DType::bf16, DType::f16, DType::f32),
                                            ::testing::Values(Layout::bhsd, Layout::bshd), ::testing::Values(64, 128)),
                         combine_case_name);

// ---- bad arguments -------------------------------------------------------------------------------

TEST(LayerRejects, BadArguments) {
  std::mt19937_64 rng(next_seed());
  const SequenceShape shape{1, 2, 128, 64, Layout::bhsd};
  HostTensor x = sequence_tensor(DType::bf16, shape);
  x.fill_random(rng);
  const HostTensor counts = int_vector(DType::i32, {64, 3});
  HostTensor mean(DType::f32, {1, 2, 2, 64});
  mean.poison();
  const HostTensor three_blocks = int_vector(DType::i32, {64, 3, 1});
  expect_error_on("valid_counts.shape", [&] { block_mean({x.ref(), three_blocks.ref(), mean.ref()}); });
  const HostTensor too_many = int_vector(DType::i32, {65, 3});
  expect_error_on("valid_counts", [&] { block_mean({x.ref(), too_many.ref(), mean.ref()}); });
  const HostTensor half_mean(DType::f16, {1, 2, 2, 64});
  expect_error_on("mean.dtype", [&] { block_mean({x.ref(), counts.ref(), half_mean.ref()}); });
  const HostTensor narrow = sequence_tensor(DType::bf16, {1, 2, 128, 32});
  expect_error_on("x.shape", [&] { block_mean({narrow.ref(), counts.ref(), mean.ref()}); });
  EXPECT_TRUE(mean.untouched());

  // block_means names the part, and writes none of the three means.
  HostTensor k_mean(DType::f32, {1, 2, 2, 64}), v_mean(DType::f32, {1, 2, 2, 64});
  k_mean.poison();
  v_mean.poison();
  const HostTensor f16_x = sequence_tensor(DType::f16, shape);
  const auto means = [&](const TensorRef& q_counts, const TensorRef& k_x, void* v_stream) {
    return BlockMeansParams{{x.ref(), q_counts, mean.ref()},
                            {k_x, counts.ref(), k_mean.ref()},
                            {x.ref(), counts.ref(), v_mean.ref(), Layout::bhsd, v_stream}};
  };
  expect_error_on("q.valid_counts", [&] { block_means(means(too_many.ref(), x.ref(), nullptr)); });
  expect_error_on("k.x.dtype", [&] { block_means(means(counts.ref(), f16_x.ref(), nullptr)); });
  int other_stream = 0;
  expect_error_on("v.stream", [&] { block_means(means(counts.ref(), x.ref(), &other_stream)); });
  EXPECT_TRUE(mean.untouched());
  EXPECT_TRUE(k_mean.untouched());
  EXPECT_TRUE(v_mean.untouched());

  CoarseProblem p;
  p.build(rng);
  CoarseStageParams params = p.params();
  const HostTensor wide(DType::i32, {p.batch, p.heads, p.nq, p.nk + 1});
  params.q2k_idx = wide.ref();
  expect_error_on("q2k_idx.shape", [&] { coarse_stage(params); });
  params = p.params();
  const HostTensor long_num(DType::i64, {p.batch, p.heads, p.nq});
  params.q2k_num = long_num.ref();
  expect_error_on("q2k_num.dtype", [&] { coarse_stage(params); });
  params = p.params();
  const HostTensor three_kv = random_f32(rng, {p.batch, 3, p.nk, p.dim});
  params.k_mean = three_kv.ref();
  expect_error_on("k_mean.shape", [&] { coarse_stage(params); });
  params = p.params();
  params.v_mean = p.q_mean.ref();
  expect_error_on("v_mean.shape", [&] { coarse_stage(params); });
  params = p.params();
  params.scale = -1.0f;
  expect_error_on("scale", [&] { coarse_stage(params); });
  params.scale = 3e38f;  // inf once in base 2
  expect_error_on("scale", [&] { coarse_stage(params); });
  // 2^31 + 1 KV blocks: int32 lists would wrap ids past 2^31 - 1 (and a top-k of 2^31 its counts).
  // Only the descriptors are large: refused before any read.
  params = p.params();
  for (TensorRef* kv : {&params.k_mean, &params.v_mean}) {
    kv->shape[2] = (std::int64_t{1} << 31) + 1;
    kv->stride = {p.kv_heads * kv->shape[2] * p.dim, kv->shape[2] * p.dim, p.dim, 1};
  }
  params.variable_block_sizes.shape[0] = params.k_mean.shape[2];
  expect_error_on("q2k_idx.dtype", [&] { coarse_stage(params); });
  EXPECT_TRUE(p.coarse.untouched() && p.idx.untouched() && p.num.untouched());

  coarse_stage(p.params());
  HostTensor dq(DType::f32, {p.batch, p.heads, p.nq, p.dim}), dk(DType::f32, {p.batch, p.kv_heads, p.nk, p.dim});
  HostTensor dv(DType::f32, {p.batch, p.kv_heads, p.nk, p.dim});
  for (HostTensor* t : {&dq, &dk, &dv}) t->poison();
  const HostTensor grad = random_f32(rng, {p.batch, p.heads, p.nq, p.dim});
  const auto backward = [&](const TensorRef& dcoarse, const TensorRef& dk_mean) {
    return CoarseStageBackwardParams{p.q_mean.ref(), p.k_mean.ref(), p.v_mean.ref(), p.valid.ref(), 0.0f,
                                     p.coarse.ref(), dcoarse,        dq.ref(),       dk_mean,       dv.ref()};
  };
  expect_error_on("dk_mean.shape", [&] { coarse_stage_backward(backward(grad.ref(), dq.ref())); });
  const HostTensor half_grad(DType::f16, {p.batch, p.heads, p.nq, p.dim});
  expect_error_on("dcoarse.dtype", [&] { coarse_stage_backward(backward(half_grad.ref(), dk.ref())); });
  expect_error_on("dcoarse", [&] { coarse_stage_backward(backward(TensorRef{}, dk.ref())); });
  EXPECT_TRUE(dq.untouched() && dk.untouched() && dv.untouched());

  HostTensor out = sequence_tensor(DType::bf16, shape);
  out.poison();
  const HostTensor coarse = random_f32(rng, {1, 2, 2, 64});
  const HostTensor fp16_gate = sequence_tensor(DType::f16, shape);
  expect_error_on("gate.dtype", [&] { gate_combine({x.ref(), coarse.ref(), fp16_gate.ref(), out.ref()}); });
  const HostTensor three_block_coarse = random_f32(rng, {1, 2, 3, 64});
  expect_error_on("coarse.shape", [&] { gate_combine({x.ref(), three_block_coarse.ref(), TensorRef{}, out.ref()}); });
  TensorRef broadcast_out = out.ref();
  broadcast_out.stride[2] = 0;  // every token's row at one place
  expect_error_on("out.stride", [&] { gate_combine({x.ref(), coarse.ref(), TensorRef{}, broadcast_out}); });
  EXPECT_TRUE(out.untouched());
  HostTensor dcoarse(DType::f32, {1, 2, 2, 64});
  expect_error_on("dgate", [&] {
    gate_combine_backward({x.ref(), coarse.ref(), TensorRef{}, dcoarse.ref(), out.ref()});
  });
}

// A written tensor over another tensor of the call is refused before anything
// is read or written, naming both (out = fine in gate_combine, which it
// documents, stays accepted: AddsTheBroadcastCoarseOutputTimesTheGate).
TEST(LayerRejects, WrittenTensorsSharingMemory) {
  std::mt19937_64 rng(next_seed());
  const CombineProblem c(rng, DType::f32, Layout::bhsd, 64);  // [2, 3, 192, 64] and coarse [2, 3, 3, 64]
  HostTensor x = c.fine, dmean = c.coarse, mean = c.coarse, k_mean = c.coarse;
  const HostTensor counts = int_vector(DType::i32, {64, 1, 0});
  // A float32 [2, 3, 3, 64] view of the first bytes of a sequence tensor.
  const auto blocks_of = [&](const HostTensor& t) {
    return TensorRef::contiguous(t.ref().data, DType::f32, {2, 3, 3, 64});
  };
  std::vector<const HostTensor*> all = {&x, &dmean, &mean, &k_mean};
  expect_refused_as_shared("mean", "x", all, [&] { block_mean({x.ref(), counts.ref(), blocks_of(x)}); });
  expect_refused_as_shared("q.mean", "v.mean", all, [&] {
    block_means({{x.ref(), counts.ref(), mean.ref()}, {x.ref(), counts.ref(), k_mean.ref()},
                 {x.ref(), counts.ref(), mean.ref()}});
  });
  expect_refused_as_shared("dx", "dmean", all, [&] { block_mean_backward({blocks_of(x), counts.ref(), x.ref()}); });

  CoarseProblem p;
  p.build(rng);
  HostTensor dcoarse = p.coarse, dq_mean = p.q_mean, dk_mean = p.k_mean, dv_mean = p.v_mean;
  all = {&p.q_mean, &p.k_mean, &p.v_mean, &p.coarse, &p.idx, &p.num, &dcoarse, &dq_mean, &dk_mean, &dv_mean};
  expect_refused_as_shared("coarse_out", "q_mean", all, [&] {
    CoarseStageParams params = p.params();
    params.coarse_out = params.q_mean;
    coarse_stage(params);
  });
  expect_refused_as_shared("q2k_idx", "q2k_num", all, [&] {
    CoarseStageParams params = p.params();
    params.q2k_num.data = params.q2k_idx.data;
    coarse_stage(params);
  });
  const auto backward = [&] {
    return CoarseStageBackwardParams{p.q_mean.ref(), p.k_mean.ref(), p.v_mean.ref(), p.valid.ref(), 0.0f,
                                     p.coarse.ref(), dcoarse.ref(), dq_mean.ref(), dk_mean.ref(), dv_mean.ref()};
  };
  expect_refused_as_shared("dq_mean", "dcoarse", all, [&] {
    CoarseStageBackwardParams params = backward();
    params.dq_mean = params.dcoarse;
    coarse_stage_backward(params);
  });
  expect_refused_as_shared("dk_mean", "dv_mean", all, [&] {
    CoarseStageBackwardParams params = backward();
    params.dk_mean = params.dv_mean;
    coarse_stage_backward(params);
  });

  HostTensor out = c.fine, dgate = c.gate, dcoarse_c = c.coarse;
  all = {&c.fine, &c.gate, &c.coarse, &out, &dgate, &dcoarse_c};
  expect_refused_as_shared("out", "gate", all, [&] {
    gate_combine({c.fine.ref(), c.coarse.ref(), c.gate.ref(), c.gate.ref()});
  });
  expect_refused_as_shared("out", "coarse", all, [&] {
    gate_combine({c.fine.ref(), blocks_of(out), c.gate.ref(), out.ref()});
  });
  expect_refused_as_shared("dcoarse", "coarse", all, [&] {
    gate_combine_backward({c.fine.ref(), c.coarse.ref(), c.gate.ref(), c.coarse.ref(), dgate.ref()});
  });
  expect_refused_as_shared("dgate", "dout", all, [&] {
    gate_combine_backward({c.fine.ref(), c.coarse.ref(), c.gate.ref(), dcoarse_c.ref(), c.fine.ref()});
  });
}

}  // namespace
}  // namespace vsa::test
