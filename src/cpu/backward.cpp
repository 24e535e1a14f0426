// CPU backward pass, flash-attention style with the base-2 LSE of the forward:
//   p = exp2(s * scale * log2e - lse), delta_r = dout_r . out_r,
//   ds = p * (dp - delta), dq = scale * sum ds k, dk = scale * sum ds q,
//   dv = sum p dout.
// Three race-free passes: delta per row; dq per query block (rows own their
// dq); dk/dv per kv block (walking the inverted lists over every query head
// of the GQA group, so each kv row is written by exactly one work item).
// Scores are formed transposed, Sᵀ = K·Qᵀ (one key per row), so every
// product is a gemm and the per-row statistics apply elementwise.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/gemm.hpp"
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

  // Rows [first, first + count) of (batch, head) as a float [count, D] matrix.
  std::vector<float> load_rows(const SequenceRows<const T>& src, std::int64_t batch, std::int64_t head,
                               std::int64_t first, std::int64_t count) const {
    std::vector<float> m(static_cast<std::size_t>(count * d_));
    for (std::int64_t r = 0; r < count; ++r) load_row(src.row(batch, head, first + r), m.data() + r * d_, d_);
    return m;
  }

  // For `keys` rows of K and V (row-major [keys, D]) and one query block's
  // Qᵀ and dOᵀ ([D, rows]): Pᵀ and dSᵀ = Pᵀ ∘ (dPᵀ − delta), both [keys, rows].
  // Keys at index >= valid get P = 0.
  void probabilities(const float* keys_k, const float* keys_v, std::int64_t keys, std::int64_t valid,
                     const std::vector<float>& q_t, const std::vector<float>& dout_t, std::int64_t stat0,
                     std::vector<float>& p_t, std::vector<float>& ds_t) const {
    const std::int64_t rows = s_.block;
    p_t.resize(static_cast<std::size_t>(keys * rows));
    ds_t.resize(p_t.size());
    gemm<Layout2d::row_major>(keys, rows, d_, scale_log2_, keys_k, d_, q_t.data(), rows, p_t.data(), rows);
    gemm<Layout2d::row_major>(keys, rows, d_, 1.0f, keys_v, d_, dout_t.data(), rows, ds_t.data(), rows);
    for (std::int64_t t = 0; t < keys; ++t) {
      float* p = p_t.data() + t * rows;
      float* ds = ds_t.data() + t * rows;
      for (std::int64_t r = 0; r < rows; ++r) {
        p[r] = t < valid ? std::exp2(p[r] - lse_[stat0 + r]) : 0.0f;
        ds[r] = p[r] * (ds[r] - delta_[stat0 + r]);
      }
    }
  }

  void compute_dq(const QueryBlock& qb) {
    const auto dq = sequence_rows<T>(p_.dq, p_.in.layout);
    const std::int64_t rows = s_.block, first = qb.index * s_.block;
    const SelectedKeys sel = gather_selected_keys(k_, v_, p_.in, s_, qb);
    std::vector<float> dq_block(static_cast<std::size_t>(rows * d_), 0.0f);
    if (sel.count > 0) {
      const auto q_t = transposed(load_rows(q_, qb.batch, qb.head, first, rows).data(), rows, d_);
      const auto dout_t = transposed(load_rows(dout_, qb.batch, qb.head, first, rows).data(), rows, d_);
      std::vector<float> p_t, ds_t;
      probabilities(sel.keys.data(), sel.values.data(), sel.padded, sel.count, q_t, dout_t,
                    row_stat(qb.batch, qb.head, first), p_t, ds_t);
      gemm<Layout2d::col_major>(rows, d_, sel.padded, scale_, ds_t.data(), rows, sel.keys.data(), d_,
                                dq_block.data(), d_);
    }
    for (std::int64_t r = 0; r < rows; ++r) store_row(dq_block.data() + r * d_, dq.row(qb.batch, qb.head, first + r), d_);
  }

  // Work item = (batch, kv head, kv block): the gradients of that block's
  // block-size rows, summed over every query head of the group and every
  // query block (and occurrence) that lists it. Rows past vbs get zeros.
  void compute_dk_dv(std::int64_t item, const InvertedLists& lists) {
    const std::int64_t kv_block = item % s_.num_kv_blocks;
    const std::int64_t kv_head = (item / s_.num_kv_blocks) % s_.kv_heads;
    const std::int64_t batch = item / (s_.num_kv_blocks * s_.kv_heads);
    const std::int64_t valid = detail::load_int(p_.in.variable_block_sizes, kv_block);
    const std::int64_t group = s_.heads / s_.kv_heads;
    const std::int64_t rows = s_.block, first_key = kv_block * s_.block;

    const std::vector<float> keys = load_rows(k_, batch, kv_head, first_key, rows);
    const std::vector<float> values = load_rows(v_, batch, kv_head, first_key, rows);
    std::vector<float> dk(keys.size(), 0.0f), dv(keys.size(), 0.0f), p_t, ds_t;
    for (std::int64_t head = kv_head * group; valid > 0 && head < (kv_head + 1) * group; ++head) {
      for (const std::int64_t q_block : lists.query_blocks(batch * s_.heads + head, kv_block)) {
        const std::int64_t first = q_block * s_.block;
        const std::vector<float> q = load_rows(q_, batch, head, first, rows);
        const std::vector<float> dout = load_rows(dout_, batch, head, first, rows);
        probabilities(keys.data(), values.data(), rows, valid, transposed(q.data(), rows, d_),
                      transposed(dout.data(), rows, d_), row_stat(batch, head, first), p_t, ds_t);
        gemm<Layout2d::row_major>(rows, d_, rows, 1.0f, p_t.data(), rows, dout.data(), d_, dv.data(), d_,
                                  Store::add);
        gemm<Layout2d::row_major>(rows, d_, rows, scale_, ds_t.data(), rows, q.data(), d_, dk.data(), d_,
                                  Store::add);
      }
    }

    const auto dk_rows = sequence_rows<T>(p_.dk, p_.in.layout);
    const auto dv_rows = sequence_rows<T>(p_.dv, p_.in.layout);
    for (std::int64_t t = 0; t < rows; ++t) {
      store_row(dk.data() + t * d_, dk_rows.row(batch, kv_head, first_key + t), d_);
      store_row(dv.data() + t * d_, dv_rows.row(batch, kv_head, first_key + t), d_);
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
