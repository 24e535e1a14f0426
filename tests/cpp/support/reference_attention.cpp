#include "support/reference_attention.hpp"

#include <cmath>
#include <limits>

namespace vsa::test {
namespace {

// Everything about one (batch, head): the mask multiplicities and the
// softmax probabilities P [Sq, Skv], computed densely.
struct HeadAttention {
  std::vector<double> weight;  // how many times each key enters each row's softmax
  std::vector<double> prob;
  std::vector<double> lse;
  std::vector<bool> empty;
};

const double* row_of(const std::vector<double>& x, std::int64_t bh, std::int64_t seq_len, std::int64_t seq,
                     std::int64_t d) {
  return x.data() + (bh * seq_len + seq) * d;
}

HeadAttention attend(const ReferenceProblem& p, std::int64_t b, std::int64_t h) {
  const std::int64_t sq = p.seq_q, skv = p.seq_kv, d = p.head_dim;
  const std::int64_t kv_bh = b * p.kv_heads + h / (p.heads / p.kv_heads);
  const std::int64_t num_q_blocks = sq / p.block;
  HeadAttention a{std::vector<double>(sq * skv, 0.0), std::vector<double>(sq * skv, 0.0),
                  std::vector<double>(sq, 0.0), std::vector<bool>(sq, true)};

  for (std::int64_t i = 0; i < num_q_blocks; ++i) {
    const std::int64_t row = (b * p.heads + h) * num_q_blocks + i;
    const std::int64_t real = p.q_vbs.empty() ? p.block : p.q_vbs[static_cast<std::size_t>(i)];
    for (std::int64_t e = 0; e < p.q2k_num[row]; ++e) {
      const std::int64_t j = p.q2k_idx[row * p.max_kv + e];
      for (std::int64_t r = i * p.block; r < i * p.block + real; ++r)
        for (std::int64_t c = j * p.block; c < j * p.block + p.vbs[j]; ++c) a.weight[r * skv + c] += 1.0;
    }
  }

  for (std::int64_t r = 0; r < sq; ++r) {
    const double* q = row_of(p.q, b * p.heads + h, sq, r, d);
    std::vector<double> score(skv);
    double max_score = -std::numeric_limits<double>::infinity();
    for (std::int64_t c = 0; c < skv; ++c) {
      if (a.weight[r * skv + c] == 0.0) continue;
      const double* k = row_of(p.k, kv_bh, skv, c, d);
      double s = 0.0;
      for (std::int64_t x = 0; x < d; ++x) s += q[x] * k[x];
      score[c] = s * p.scale;
      max_score = std::max(max_score, score[c]);
    }
    if (max_score == -std::numeric_limits<double>::infinity()) continue;  // empty row
    double total = 0.0;
    for (std::int64_t c = 0; c < skv; ++c)
      if (a.weight[r * skv + c] != 0.0) total += a.weight[r * skv + c] * std::exp(score[c] - max_score);
    for (std::int64_t c = 0; c < skv; ++c)
      if (a.weight[r * skv + c] != 0.0)
        a.prob[r * skv + c] = a.weight[r * skv + c] * std::exp(score[c] - max_score) / total;
    a.lse[r] = (max_score + std::log(total)) / std::log(2.0);
    a.empty[r] = false;
  }
  return a;
}

}  // namespace

ReferenceForward reference_forward(const ReferenceProblem& p) {
  const std::int64_t sq = p.seq_q, skv = p.seq_kv, d = p.head_dim;
  ReferenceForward f{std::vector<double>(p.batch * p.heads * sq * d, 0.0),
                     std::vector<double>(p.batch * p.heads * sq, 0.0),
                     std::vector<bool>(p.batch * p.heads * sq, true)};
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t h = 0; h < p.heads; ++h) {
      const HeadAttention a = attend(p, b, h);
      const std::int64_t bh = b * p.heads + h;
      const std::int64_t kv_bh = b * p.kv_heads + h / (p.heads / p.kv_heads);
      for (std::int64_t r = 0; r < sq; ++r) {
        f.lse[bh * sq + r] = a.lse[r];
        f.empty_row[bh * sq + r] = a.empty[r];
        double* out = f.out.data() + (bh * sq + r) * d;
        for (std::int64_t c = 0; c < skv; ++c) {
          const double w = a.prob[r * skv + c];
          if (w == 0.0) continue;
          const double* v = row_of(p.v, kv_bh, skv, c, d);
          for (std::int64_t x = 0; x < d; ++x) out[x] += w * v[x];
        }
      }
    }
  }
  return f;
}

ReferenceGradients reference_backward(const ReferenceProblem& p, const std::vector<double>& dout,
                                      const std::vector<double>* out) {
  const std::int64_t sq = p.seq_q, skv = p.seq_kv, d = p.head_dim;
  ReferenceGradients g{std::vector<double>(p.q.size(), 0.0), std::vector<double>(p.k.size(), 0.0),
                       std::vector<double>(p.v.size(), 0.0)};
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t h = 0; h < p.heads; ++h) {
      const HeadAttention a = attend(p, b, h);
      const std::int64_t bh = b * p.heads + h;
      const std::int64_t kv_bh = b * p.kv_heads + h / (p.heads / p.kv_heads);
      for (std::int64_t r = 0; r < sq; ++r) {
        if (a.empty[r]) continue;
        const double* q = row_of(p.q, bh, sq, r, d);
        const double* dout_row = row_of(dout, bh, sq, r, d);
        // dP_rc = dout_r . v_c; out = P V gives dS = P * (dP - sum_c P_rc dP_rc).
        std::vector<double> dp(skv, 0.0);
        double expected_dp = 0.0;
        for (std::int64_t c = 0; c < skv; ++c) {
          if (a.prob[r * skv + c] == 0.0) continue;
          const double* v = row_of(p.v, kv_bh, skv, c, d);
          for (std::int64_t x = 0; x < d; ++x) dp[c] += dout_row[x] * v[x];
          expected_dp += a.prob[r * skv + c] * dp[c];
        }
        if (out != nullptr) {
          const double* out_row = row_of(*out, bh, sq, r, d);
          expected_dp = 0.0;
          for (std::int64_t x = 0; x < d; ++x) expected_dp += dout_row[x] * out_row[x];
        }
        double* dq = g.dq.data() + (bh * sq + r) * d;
        for (std::int64_t c = 0; c < skv; ++c) {
          const double prob = a.prob[r * skv + c];
          if (prob == 0.0) continue;
          const double ds = prob * (dp[c] - expected_dp) * p.scale;
          const double* k = row_of(p.k, kv_bh, skv, c, d);
          double* dk = g.dk.data() + (kv_bh * skv + c) * d;
          double* dv = g.dv.data() + (kv_bh * skv + c) * d;
          for (std::int64_t x = 0; x < d; ++x) {
            dq[x] += ds * k[x];
            dk[x] += ds * q[x];
            dv[x] += prob * dout_row[x];
          }
        }
      }
    }
  }
  return g;
}

}  // namespace vsa::test
