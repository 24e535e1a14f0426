// CPU backward pass, flash-attention style with the base-2 LSE of the forward:
//   p = exp2(s * scale * log2e - lse), delta_r = dout_r . out_r,
//   ds = p * (dp - delta), dq = scale * sum ds k, dk = scale * sum ds q,
//   dv = sum p dout.
// Three race-free passes: delta per row; dq per query block (rows own their
// dq); dk/dv per kv block (walking the inverted lists over every query head
// of the GQA group, so each kv row is written by exactly one work item).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/inverted_lists.hpp"
#include "cpu/parallel_for.hpp"
#include "cpu/selected_keys.hpp"

namespace vsa::cpu {
namespace {

template <class T>
class BackwardPass {
 public:
  BackwardPass(const BackwardParams& p, const ProblemShape& s, float scale)
      : p_(p),
        s_(s),
        scale_(scale),
        scale_log2_(scale * kLog2e),
        d_(s.head_dim),
        q_(sequence_rows<const T>(p.in.q, p.in.layout)),
        k_(sequence_rows<const T>(p.in.k, p.in.layout)),
        v_(sequence_rows<const T>(p.in.v, p.in.layout)),
        out_(sequence_rows<const T>(p.out, p.in.layout)),
        dout_(sequence_rows<const T>(p.dout, p.in.layout)),
        lse_(static_cast<const float*>(p.lse.data)),
        delta_(static_cast<std::size_t>(s.batch * s.heads * s.seq_q)) {}

  void run() {
    const std::int64_t query_blocks = s_.batch * s_.heads * s_.num_q_blocks;
    parallel_for(query_blocks, [&](std::int64_t item) { compute_delta(query_block(item, s_)); });
    parallel_for(query_blocks, [&](std::int64_t item) { compute_dq(query_block(item, s_)); });
    // The backend derives its own KV->Q lists from the validated q2k lists
    // rather than trusting p.k2q_*, whose contents were never checked.
    const InvertedLists lists(p_.in.q2k_idx, p_.in.q2k_num, s_.num_kv_blocks);
    parallel_for(s_.batch * s_.kv_heads * s_.num_kv_blocks,
                 [&](std::int64_t item) { compute_dk_dv(item, lists); });
  }

 private:
  // Index of a row's lse and delta in their [B, H, Sq] arrays.
  std::int64_t row_stat(std::int64_t batch, std::int64_t head, std::int64_t seq) const {
    return (batch * s_.heads + head) * s_.seq_q + seq;
  }

  void compute_delta(const QueryBlock& qb) {
    std::vector<float> out_row(static_cast<std::size_t>(d_)), dout_row(static_cast<std::size_t>(d_));
    for (std::int64_t r = 0; r < s_.block; ++r) {
      const std::int64_t seq = qb.index * s_.block + r;
      load_row(out_.row(qb.batch, qb.head, seq), out_row.data(), d_);
      load_row(dout_.row(qb.batch, qb.head, seq), dout_row.data(), d_);
      delta_[row_stat(qb.batch, qb.head, seq)] = dot(out_row.data(), dout_row.data(), d_);
    }
  }

  void compute_dq(const QueryBlock& qb) {
    const auto dq = sequence_rows<T>(p_.dq, p_.in.layout);
    const SelectedKeys sel = gather_selected_keys(k_, v_, p_.in, s_, qb);
    std::vector<float> q_row(static_cast<std::size_t>(d_)), dout_row(static_cast<std::size_t>(d_));
    std::vector<float> dq_row(static_cast<std::size_t>(d_));
    for (std::int64_t r = 0; r < s_.block; ++r) {
      const std::int64_t seq = qb.index * s_.block + r;
      std::fill(dq_row.begin(), dq_row.end(), 0.0f);
      if (sel.count > 0) {
        load_row(q_.row(qb.batch, qb.head, seq), q_row.data(), d_);
        load_row(dout_.row(qb.batch, qb.head, seq), dout_row.data(), d_);
        const std::int64_t stat = row_stat(qb.batch, qb.head, seq);
        for (std::int64_t l = 0; l < sel.count; ++l) {
          const float* key = sel.keys.data() + l * d_;
          const float prob = std::exp2(dot(q_row.data(), key, d_) * scale_log2_ - lse_[stat]);
          const float dp = dot(dout_row.data(), sel.values.data() + l * d_, d_);
          axpy(prob * (dp - delta_[stat]), key, dq_row.data(), d_);
        }
        for (float& x : dq_row) x *= scale_;
      }
      store_row(dq_row.data(), dq.row(qb.batch, qb.head, seq), d_);
    }
  }

  // Work item = (batch, kv head, kv block): the gradients of that block's
  // block-size rows, summed over every query head of the group and every
  // query block (and occurrence) that lists it.
  void compute_dk_dv(std::int64_t item, const InvertedLists& lists) {
    const std::int64_t kv_block = item % s_.num_kv_blocks;
    const std::int64_t kv_head = (item / s_.num_kv_blocks) % s_.kv_heads;
    const std::int64_t batch = item / (s_.num_kv_blocks * s_.kv_heads);
    const std::int64_t valid = detail::load_int(p_.in.variable_block_sizes, kv_block);
    const std::int64_t group = s_.heads / s_.kv_heads;

    std::vector<float> keys(static_cast<std::size_t>(valid * d_)), values(keys.size());
    std::vector<float> dk(keys.size(), 0.0f), dv(keys.size(), 0.0f);
    for (std::int64_t t = 0; t < valid; ++t) {
      const std::int64_t seq = kv_block * s_.block + t;
      load_row(k_.row(batch, kv_head, seq), keys.data() + t * d_, d_);
      load_row(v_.row(batch, kv_head, seq), values.data() + t * d_, d_);
    }

    std::vector<float> q_row(static_cast<std::size_t>(d_)), dout_row(static_cast<std::size_t>(d_));
    for (std::int64_t head = kv_head * group; head < (kv_head + 1) * group; ++head) {
      for (const std::int64_t q_block : lists.query_blocks(batch * s_.heads + head, kv_block)) {
        for (std::int64_t r = 0; r < s_.block; ++r) {
          const std::int64_t seq = q_block * s_.block + r;
          load_row(q_.row(batch, head, seq), q_row.data(), d_);
          load_row(dout_.row(batch, head, seq), dout_row.data(), d_);
          const std::int64_t stat = row_stat(batch, head, seq);
          for (std::int64_t t = 0; t < valid; ++t) {
            const float prob =
                std::exp2(dot(q_row.data(), keys.data() + t * d_, d_) * scale_log2_ - lse_[stat]);
            const float dp = dot(dout_row.data(), values.data() + t * d_, d_);
            axpy(prob, dout_row.data(), dv.data() + t * d_, d_);
            axpy(prob * (dp - delta_[stat]), q_row.data(), dk.data() + t * d_, d_);
          }
        }
      }
    }
    for (float& x : dk) x *= scale_;

    const auto dk_rows = sequence_rows<T>(p_.dk, p_.in.layout);
    const auto dv_rows = sequence_rows<T>(p_.dv, p_.in.layout);
    for (std::int64_t t = 0; t < s_.block; ++t) {
      const std::int64_t seq = kv_block * s_.block + t;
      if (t < valid) {
        store_row(dk.data() + t * d_, dk_rows.row(batch, kv_head, seq), d_);
        store_row(dv.data() + t * d_, dv_rows.row(batch, kv_head, seq), d_);
      } else {  // masked keys get no gradient, but every element is written
        store_zero_row(dk_rows.row(batch, kv_head, seq), d_);
        store_zero_row(dv_rows.row(batch, kv_head, seq), d_);
      }
    }
  }

  const BackwardParams& p_;
  const ProblemShape& s_;
  const float scale_, scale_log2_;
  const std::int64_t d_;
  const SequenceRows<const T> q_, k_, v_, out_, dout_;
  const float* lse_;
  std::vector<float> delta_;  // [B, H, Sq]: dout . out of every row
};

}  // namespace

void backward(const BackwardParams& p, const ProblemShape& s, float scale) {
  with_element_type(p.in.q.dtype, [&](auto element) { BackwardPass<decltype(element)>(p, s, scale).run(); });
}

}  // namespace vsa::cpu
