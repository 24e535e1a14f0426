#include "support/attention_problem.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <cmath>
#include <limits>
#include <numeric>

namespace vsa::test {

double tolerance(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-2; }
double lse_tolerance(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-4; }

namespace {

// Padding query rows hold their drawn values times this (exact in every
// dtype, finite): far from any real row's, so a padding row that leaked into
// a result would show.
constexpr double kPaddingScale = 512.0;

}  // namespace

std::vector<std::int64_t> query_row_cuts(std::int64_t block) {
  if (block == 128) return {0, 1, 63, 64, 65, 80, 81, 96, 97, 127, 128, 17, 32, 33};
  return {0, 1, 15, 16, 17, 31, 32, 33, 63, 64};
}

HostTensor AttentionProblem::sequence_tensor(std::int64_t heads, std::int64_t seq) const {
  const AttentionCase& c = case_;
  std::vector<std::int64_t> shape = c.layout == Layout::bhsd
                                        ? std::vector<std::int64_t>{c.batch, heads, seq, c.head_dim}
                                        : std::vector<std::int64_t>{c.batch, seq, heads, c.head_dim};
  if (c.padded_rows) return HostTensor::with_row_pitch(c.dtype, shape, c.head_dim + 8);
  return HostTensor(c.dtype, shape);
}

AttentionProblem::AttentionProblem(const AttentionCase& c, std::uint64_t seed) : case_(c), rng_(seed) {
  q = sequence_tensor(c.heads, c.seq_q());
  k = sequence_tensor(c.kv_heads, c.seq_kv());
  v = sequence_tensor(c.kv_heads, c.seq_kv());
  out = sequence_tensor(c.heads, c.seq_q());
  dout = sequence_tensor(c.heads, c.seq_q());
  dq = sequence_tensor(c.heads, c.seq_q());
  dk = sequence_tensor(c.kv_heads, c.seq_kv());
  dv = sequence_tensor(c.kv_heads, c.seq_kv());
  lse = HostTensor(DType::f32, {c.batch, c.heads, c.seq_q()});
  q.fill_random(rng_);
  k.fill_random(rng_);
  v.fill_random(rng_);
  if (c.q_padding) {
    q_values_ = q;
    q_vbs = HostTensor(c.q_vbs_dtype, {c.num_q_blocks});
    const std::vector<std::int64_t> cuts = query_row_cuts(c.block);
    const auto start = std::uniform_int_distribution<std::size_t>(0, cuts.size() - 1)(rng_);
    for (std::int64_t i = 0; i < c.num_q_blocks; ++i)
      set_q_vbs(i, cuts[(start + static_cast<std::size_t>(i)) % cuts.size()]);
  }

  vbs = HostTensor(c.vbs_dtype, {c.num_kv_blocks});
  std::uniform_int_distribution<std::int64_t> partial(1, c.block - 1);
  for (std::int64_t j = 0; j < c.num_kv_blocks; ++j) {
    const std::int64_t kind = j % 4;  // full, partial, full, zero: every kind once NK >= 4
    vbs.set_int(j, kind == 3 ? 0 : kind == 1 ? partial(rng_) : c.block);
  }
  k_values_ = k;
  v_values_ = v;
  for (std::int64_t j = 0; j < c.num_kv_blocks; ++j) fill_kv_block(j);

  q2k_idx = HostTensor(c.idx_dtype, {c.batch, c.heads, c.num_q_blocks, c.max_kv});
  q2k_num = HostTensor(c.num_dtype, {c.batch, c.heads, c.num_q_blocks});
  std::uniform_int_distribution<std::int64_t> count(
      0, std::min(c.max_kv, c.duplicates ? c.max_kv : c.num_kv_blocks));
  std::uniform_int_distribution<std::int64_t> any_block(0, c.num_kv_blocks - 1);
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t h = 0; h < c.heads; ++h) {
      for (std::int64_t i = 0; i < c.num_q_blocks; ++i) {
        std::vector<std::int64_t> blocks(static_cast<std::size_t>(c.num_kv_blocks));
        std::iota(blocks.begin(), blocks.end(), 0);
        std::shuffle(blocks.begin(), blocks.end(), rng_);
        if (c.duplicates)
          for (std::int64_t& j : blocks) j = any_block(rng_);
        blocks.resize(static_cast<std::size_t>(count(rng_)));
        set_list(b, h, i, blocks);
      }
    }
  }
}

void AttentionProblem::set_list(std::int64_t b, std::int64_t h, std::int64_t i,
                                const std::vector<std::int64_t>& blocks) {
  const AttentionCase& c = case_;
  const std::int64_t row = (b * c.heads + h) * c.num_q_blocks + i;
  const auto count = static_cast<std::int64_t>(blocks.size());
  // Padding cycles through -1 and ids out of range — NK (one past the end),
  // far past it, the int32 extremes — none of which any backend may read.
  const std::int64_t padding[] = {-1, c.num_kv_blocks, 1000 + c.num_kv_blocks,
                                  std::numeric_limits<std::int32_t>::max(),
                                  std::numeric_limits<std::int32_t>::min()};
  for (std::int64_t e = 0; e < c.max_kv; ++e)
    q2k_idx.set_int(row * c.max_kv + e, e < count ? blocks[static_cast<std::size_t>(e)] : padding[e % 5]);
  q2k_num.set_int(row, count);
}

void AttentionProblem::set_vbs(std::int64_t block, std::int64_t valid) {
  vbs.set_int(block, valid);
  fill_kv_block(block);
}

void AttentionProblem::fill_kv_block(std::int64_t j) {
  const AttentionCase& c = case_;
  const std::int64_t valid = vbs.get_int(j);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < c.kv_heads; ++h)
      for (std::int64_t s = j * c.block; s < (j + 1) * c.block; ++s)
        for (std::int64_t x = 0; x < c.head_dim; ++x) {
          const std::int64_t flat = c.layout == Layout::bhsd ? k.flat_index(b, h, s, x) : k.flat_index(b, s, h, x);
          if (s - j * c.block < valid) {
            k.set(flat, k_values_.get(flat));
            v.set(flat, v_values_.get(flat));
          } else {
            k.poison_at(flat);
            v.poison_at(flat);
          }
        }
}

template <class Visit>
void AttentionProblem::each_element_of_row(const HostTensor& t, std::int64_t seq, Visit&& visit) const {
  const AttentionCase& c = case_;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < c.heads; ++h)
      for (std::int64_t x = 0; x < c.head_dim; ++x)
        visit(c.layout == Layout::bhsd ? t.flat_index(b, h, seq, x) : t.flat_index(b, seq, h, x));
}

void AttentionProblem::set_q_vbs(std::int64_t block, std::int64_t real) {
  q_vbs.set_int(block, real);
  fill_q_block(block);
}

bool AttentionProblem::padding_row(std::int64_t seq) const {
  return case_.q_padding && seq % case_.block >= q_vbs.get_int(seq / case_.block);
}

void AttentionProblem::fill_q_block(std::int64_t i) {
  for (std::int64_t s = i * case_.block; s < (i + 1) * case_.block; ++s) {
    const bool padding = padding_row(s);
    each_element_of_row(q, s, [&](std::int64_t flat) {
      q.set(flat, q_values_.get(flat) * (padding ? kPaddingScale : 1.0));
    });
  }
}

AttentionInputs AttentionProblem::inputs() const {
  AttentionInputs in;
  in.q = q.ref();
  in.k = k.ref();
  in.v = v.ref();
  in.q2k_idx = q2k_idx.ref();
  in.q2k_num = q2k_num.ref();
  in.variable_block_sizes = vbs.ref();
  if (case_.q_padding) in.q_variable_block_sizes = q_vbs.ref();
  in.layout = case_.layout;
  in.scale = case_.scale;
  return in;
}

ForwardParams AttentionProblem::forward_params(bool need_lse) {
  out.poison();
  lse.poison();
  ForwardParams p;
  p.in = inputs();
  p.out = out.ref();
  p.lse = lse.ref();
  p.need_lse = need_lse;
  return p;
}

BackwardParams AttentionProblem::backward_params() {
  const ReferenceForward f = reference_forward(reference());
  const AttentionCase& c = case_;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < c.heads; ++h)
      for (std::int64_t s = 0; s < c.seq_q(); ++s) {
        const std::int64_t stat = (b * c.heads + h) * c.seq_q() + s;
        lse.set(stat, f.empty_row[stat] ? kEmptyRowLse : f.lse[stat]);
        for (std::int64_t x = 0; x < c.head_dim; ++x) {
          const std::int64_t flat =
              c.layout == Layout::bhsd ? out.flat_index(b, h, s, x) : out.flat_index(b, s, h, x);
          out.set(flat, f.out[stat * c.head_dim + x]);
        }
      }
  dout.fill_random(rng_);
  for (std::int64_t s = 0; s < c.seq_q(); ++s) {
    if (!padding_row(s)) continue;
    each_element_of_row(out, s, [&](std::int64_t flat) { out.poison_at(flat); });
    each_element_of_row(dout, s, [&](std::int64_t flat) { dout.set(flat, dout.get(flat) * kPaddingScale); });
    for (std::int64_t bh = 0; bh < c.batch * c.heads; ++bh) lse.poison_at(bh * c.seq_q() + s);
  }
  dq.poison();
  dk.poison();
  dv.poison();
  BackwardParams p;
  p.in = inputs();
  p.out = out.ref();
  p.lse = lse.ref();
  p.dout = dout.ref();
  p.dq = dq.ref();
  p.dk = dk.ref();
  p.dv = dv.ref();
  return p;
}

std::vector<double> AttentionProblem::bhsd_values(const HostTensor& t) const {
  const auto& shape = t.shape();
  const bool bshd = case_.layout == Layout::bshd;
  const std::int64_t heads = bshd ? shape[2] : shape[1], seq = bshd ? shape[1] : shape[2];
  std::vector<double> values;
  values.reserve(static_cast<std::size_t>(t.numel()));
  for (std::int64_t b = 0; b < shape[0]; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t s = 0; s < seq; ++s)
        for (std::int64_t x = 0; x < shape[3]; ++x)
          values.push_back(t.get(bshd ? t.flat_index(b, s, h, x) : t.flat_index(b, h, s, x)));
  return values;
}

ReferenceProblem AttentionProblem::reference() const {
  const AttentionCase& c = case_;
  ReferenceProblem r{c.batch,
                     c.heads,
                     c.kv_heads,
                     c.seq_q(),
                     c.seq_kv(),
                     c.head_dim,
                     c.block,
                     c.max_kv,
                     c.scale != 0.0f ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim)),
                     bhsd_values(q),
                     bhsd_values(k),
                     bhsd_values(v),
                     {},
                     {},
                     {},
                     {}};
  for (std::int64_t e = 0; e < q2k_idx.numel(); ++e) r.q2k_idx.push_back(q2k_idx.get_int(e));
  for (std::int64_t e = 0; e < q2k_num.numel(); ++e) r.q2k_num.push_back(q2k_num.get_int(e));
  for (std::int64_t e = 0; e < vbs.numel(); ++e) r.vbs.push_back(vbs.get_int(e));
  if (c.q_padding)
    for (std::int64_t e = 0; e < q_vbs.numel(); ++e) r.q_vbs.push_back(q_vbs.get_int(e));
  return r;
}

void AttentionProblem::expect_forward_matches(bool need_lse) const {
  const ReferenceForward f = reference_forward(reference());
  EXPECT_TRUE(out.written_exactly_view()) << "out: some element not written, or a gap written";
  const std::vector<double> actual = bhsd_values(out);
  EXPECT_LE(relative_error(actual, f.out), tolerance(case_.dtype)) << "out";

  std::vector<double> lse_actual, lse_expected;
  for (std::size_t row = 0; row < f.empty_row.size(); ++row) {
    const auto d = static_cast<std::size_t>(case_.head_dim);
    if (f.empty_row[row]) {
      for (std::size_t x = 0; x < d; ++x) ASSERT_EQ(actual[row * d + x], 0.0) << "empty row " << row;
      if (need_lse) {
        ASSERT_EQ(lse.get(static_cast<std::int64_t>(row)), kEmptyRowLse) << "row " << row;
      }
    } else if (need_lse) {
      lse_actual.push_back(lse.get(static_cast<std::int64_t>(row)));
      lse_expected.push_back(f.lse[row]);
    }
  }
  if (need_lse) {
    EXPECT_TRUE(lse.written_exactly_view()) << "lse: some element not written";
    EXPECT_LE(relative_error(lse_actual, lse_expected), lse_tolerance(case_.dtype)) << "lse";
  } else {
    EXPECT_TRUE(lse.untouched()) << "need_lse = false wrote lse";
  }
}

ReferenceGradients AttentionProblem::expect_backward_matches(const ReferenceGradients& added) const {
  ReferenceGradients g = reference_backward(reference(), bhsd_values(dout));
  for (auto [grad, extra] : {std::pair{&g.dq, &added.dq}, std::pair{&g.dk, &added.dk}, std::pair{&g.dv, &added.dv}})
    for (std::size_t e = 0; e < extra->size(); ++e) (*grad)[e] += (*extra)[e];
  const std::pair<const HostTensor*, const std::vector<double>*> grads[] = {
      {&dq, &g.dq}, {&dk, &g.dk}, {&dv, &g.dv}};
  const char* names[] = {"dq", "dk", "dv"};
  for (int n = 0; n < 3; ++n) {
    EXPECT_TRUE(grads[n].first->written_exactly_view()) << names[n] << ": some element not written";
    EXPECT_LE(relative_error(bhsd_values(*grads[n].first), *grads[n].second), tolerance(case_.dtype))
        << names[n];
  }
  return g;
}

}  // namespace vsa::test
