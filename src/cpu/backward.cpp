// CPU backward pass, flash-attention style with the base-2 LSE of the forward:
//   p = exp2(s * scale * log2e - lse), delta_r = dout_r . out_r,
//   ds = p * (dp - delta), dq = scale * sum ds k, dk = scale * sum ds q,
//   dv = sum p dout.
// Two race-free passes: per query block, delta and dq (rows own their dq);
// per kv block, dk and dv (walking the inverted lists over every query head
// of the GQA group, so each kv row is written by exactly one work item).
// Every product is a single-threaded matmul on the item's thread.
#include <algorithm>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/inverted_lists.hpp"
#include "cpu/matmul.hpp"
#include "cpu/parallel_for.hpp"
#include "cpu/selected_keys.hpp"
#include "cpu/softmax_math.hpp"

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
    parallel_for(s_.batch * s_.heads * s_.num_q_blocks, [&](std::int64_t item) { compute_dq(query_block(item, s_)); });
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

  // One query block's rows (q and dout, [rows, D]) against `keys` keys and
  // values ([keys, D]): P into scores and dS = P ∘ (dP − delta) into
  // dscores, both [rows, keys].
  void probabilities(FloatRows q, FloatRows dout, FloatRows keys_k, FloatRows keys_v, std::int64_t keys,
                     std::int64_t stat0, float* scores, float* dscores) const {
    const std::int64_t rows = s_.block;
    matmul(Transpose::no, Transpose::yes, rows, keys, d_, scale_log2_, q.data, q.ld, keys_k.data, keys_k.ld, 0.0f,
           scores, keys);
    matmul(Transpose::no, Transpose::yes, rows, keys, d_, 1.0f, dout.data, dout.ld, keys_v.data, keys_v.ld, 0.0f,
           dscores, keys);
    for (std::int64_t r = 0; r < rows; ++r) {
      float* p = scores + r * keys;
      float* ds = dscores + r * keys;
      exp2_shifted(p, keys, lse_[stat0 + r]);
      const float delta = delta_[stat0 + r];
      for (std::int64_t t = 0; t < keys; ++t) ds[t] = p[t] * (ds[t] - delta);
    }
  }

  // delta and dq of one query block's rows.
  void compute_dq(const QueryBlock& qb) {
    Scratch& scratch = thread_scratch();
    const std::int64_t rows = s_.block, first = qb.index * s_.block, stat0 = row_stat(qb.batch, qb.head, first);
    const FloatRows dout = float_rows(dout_, qb.batch, qb.head, first, rows, d_, scratch.douts);
    {  // out is needed for delta only; its scratch is the queries' next
      const FloatRows out = float_rows(out_, qb.batch, qb.head, first, rows, d_, scratch.queries);
      for (std::int64_t r = 0; r < rows; ++r)
        delta_[stat0 + r] = dot(out.data + r * out.ld, dout.data + r * dout.ld, d_);
    }

    float* dq_block = scratch.result.get(rows * d_);
    const SelectedKeys sel = gather_selected_keys(k_, v_, p_.in, s_, qb, scratch);
    if (sel.count == 0) {
      std::fill(dq_block, dq_block + rows * d_, 0.0f);
    } else {
      const FloatRows q = float_rows(q_, qb.batch, qb.head, first, rows, d_, scratch.queries);
      float* p = scratch.scores.get(rows * sel.count);
      float* ds = scratch.dscores.get(rows * sel.count);
      probabilities(q, dout, FloatRows{sel.keys, d_}, FloatRows{sel.values, d_}, sel.count, stat0, p, ds);
      matmul(Transpose::no, Transpose::no, rows, d_, sel.count, scale_, ds, sel.count, sel.keys, d_, 0.0f, dq_block,
             d_);
    }
    const auto dq = sequence_rows<T>(p_.dq, p_.in.layout);
    for (std::int64_t r = 0; r < rows; ++r) store_row(dq_block + r * d_, dq.row(qb.batch, qb.head, first + r), d_);
  }

  // Work item = (batch, kv head, kv block): the gradients of that block's
  // block-size rows, summed over every query head of the group and every
  // query block (and occurrence) that lists it. Rows past vbs get zeros.
  void compute_dk_dv(std::int64_t item, const InvertedLists& lists) {
    Scratch& scratch = thread_scratch();
    const std::int64_t kv_block = item % s_.num_kv_blocks;
    const std::int64_t kv_head = (item / s_.num_kv_blocks) % s_.kv_heads;
    const std::int64_t batch = item / (s_.num_kv_blocks * s_.kv_heads);
    const std::int64_t valid = detail::load_int(p_.in.variable_block_sizes, kv_block);
    const std::int64_t group = s_.heads / s_.kv_heads;
    const std::int64_t rows = s_.block, first_key = kv_block * s_.block;

    float* dk = scratch.result.get(rows * d_);
    float* dv = scratch.result2.get(rows * d_);
    std::fill(dk, dk + rows * d_, 0.0f);
    std::fill(dv, dv + rows * d_, 0.0f);
    const FloatRows keys = float_rows(k_, batch, kv_head, first_key, valid, d_, scratch.keys);
    const FloatRows values = float_rows(v_, batch, kv_head, first_key, valid, d_, scratch.values);
    for (std::int64_t head = kv_head * group; valid > 0 && head < (kv_head + 1) * group; ++head) {
      for (const std::int64_t q_block : lists.query_blocks(batch * s_.heads + head, kv_block)) {
        const std::int64_t first = q_block * s_.block;
        const FloatRows q = float_rows(q_, batch, head, first, rows, d_, scratch.queries);
        const FloatRows dout = float_rows(dout_, batch, head, first, rows, d_, scratch.douts);
        float* p = scratch.scores.get(rows * valid);
        float* ds = scratch.dscores.get(rows * valid);
        probabilities(q, dout, keys, values, valid, row_stat(batch, head, first), p, ds);
        // dv += Pᵀ·dout and dk += scale · dSᵀ·q over the valid keys.
        matmul(Transpose::yes, Transpose::no, valid, d_, rows, 1.0f, p, valid, dout.data, dout.ld, 1.0f, dv, d_);
        matmul(Transpose::yes, Transpose::no, valid, d_, rows, scale_, ds, valid, q.data, q.ld, 1.0f, dk, d_);
      }
    }

    const auto dk_rows = sequence_rows<T>(p_.dk, p_.in.layout);
    const auto dv_rows = sequence_rows<T>(p_.dv, p_.in.layout);
    for (std::int64_t t = 0; t < rows; ++t) {
      store_row(dk + t * d_, dk_rows.row(batch, kv_head, first_key + t), d_);
      store_row(dv + t * d_, dv_rows.row(batch, kv_head, first_key + t), d_);
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
