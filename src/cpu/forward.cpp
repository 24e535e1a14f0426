// CPU forward pass: each query block is one work item. Its rows get an exact
// (not online) base-2 softmax over the gathered keys, accumulated in float:
// S = Q·Kᵀ and O = P·V are two matrix products (matmul.hpp), the softmax in
// between runs row by row on vectorized exponentials (softmax_math.hpp).
// With ForwardParams::coarse the VSA layer's gate combine is applied to each
// row right after it is written (combine_row.hpp), after the rounded row is
// copied to ForwardParams::fine when that is given. Padding query rows
// (q_variable_block_sizes) are left out of every product and written as empty
// rows: that is what makes the forward's work proportional to the real tokens.
#include <algorithm>
#include <cmath>

#include "cpu/combine_row.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/matmul.hpp"
#include "cpu/parallel_for.hpp"
#include "cpu/selected_keys.hpp"
#include "cpu/softmax_math.hpp"

namespace vsa::cpu {
namespace {

template <class T>
void forward_typed(const ForwardParams& p, const ProblemShape& s, float scale) {
  const auto q = sequence_rows<const T>(p.in.q, p.in.layout);
  const auto k = sequence_rows<const T>(p.in.k, p.in.layout);
  const auto v = sequence_rows<const T>(p.in.v, p.in.layout);
  const auto out = sequence_rows<T>(p.out, p.in.layout);
  float* lse = p.need_lse ? static_cast<float*>(p.lse.data) : nullptr;
  const std::int64_t d = s.head_dim, rows = s.block;
  const float scale_log2 = scale * kLog2e;
  const auto* coarse = static_cast<const float*>(p.coarse.data);  // null: no fused combine
  const bool gated = p.gate.defined();
  const auto gate = sequence_rows<const T>(p.gate, p.in.layout);
  const auto fine = sequence_rows<T>(p.fine, p.in.layout);  // with coarse only
  const bool keep_fine = p.fine.defined();

  parallel_for(s.batch * s.heads * s.num_q_blocks, [&](std::int64_t item) {
    Scratch& scratch = thread_scratch();
    const QueryBlock qb = query_block(item, s);
    const std::int64_t first_seq = qb.index * s.block;
    float* lse_rows = lse == nullptr ? nullptr : lse + (qb.batch * s.heads + qb.head) * s.seq_q + first_seq;
    // Only the real rows are computed: every product below has `real` rows.
    const std::int64_t real = real_query_rows(p.in, s, qb);
    const SelectedKeys sel = real > 0 ? gather_selected_keys(k, v, p.in, s, qb, scratch) : SelectedKeys{};
    float* acc = scratch.result.get(rows * d);
    // coarse is [B, H, NQ, D]: the block's row has the index of its list row.
    const float* coarse_row = coarse == nullptr ? nullptr : coarse + qb.list_row * d;
    // Row r of the block, from its float values (already in out when in_place);
    // the fused combine then reads back the rounded value, as gate_combine would.
    auto write_row = [&](const float* values, std::int64_t r, bool in_place) {
      T* dst = out.row(qb.batch, qb.head, first_seq + r);
      if (!in_place) store_row(values, dst, d);
      if (coarse_row == nullptr) return;
      if (keep_fine) std::copy(dst, dst + d, fine.row(qb.batch, qb.head, first_seq + r));
      combine_row<T>(dst, coarse_row, gated ? gate.row(qb.batch, qb.head, first_seq + r) : nullptr, dst, d);
    };

    // Rows [from, rows) attend to nothing (or are padding): exactly zero, the sentinel LSE.
    auto write_empty_rows = [&](std::int64_t from) {
      std::fill(acc + from * d, acc + rows * d, 0.0f);
      for (std::int64_t r = from; r < rows; ++r) {
        write_row(acc + r * d, r, false);
        if (lse_rows != nullptr) lse_rows[r] = kEmptyRowLse;
      }
    };
    if (sel.count == 0 || real == 0) {
      write_empty_rows(0);
      return;
    }

    const FloatRows queries = float_rows(q, qb.batch, qb.head, first_seq, real, d, scratch.queries);
    float* probs = scratch.scores.get(real * sel.count);  // S, then the unnormalized P, [real, count]
    float* inv_sum = scratch.row_stats.get(real);
    matmul(Transpose::no, Transpose::yes, real, sel.count, d, scale_log2, queries.data, queries.ld, sel.keys, d, 0.0f,
           probs, sel.count);
    for (std::int64_t r = 0; r < real; ++r) {
      float* row = probs + r * sel.count;
      const float top = row_max(row, sel.count);
      const float sum = exp2_shifted(row, sel.count, top);
      inv_sum[r] = 1.0f / sum;
      if (lse_rows != nullptr) lse_rows[r] = top + std::log2(sum);
    }
    const FloatOutRows dst = float_out_rows(out, qb.batch, qb.head, first_seq, d, acc);
    matmul(Transpose::no, Transpose::no, real, d, sel.count, 1.0f, probs, sel.count, sel.values, d, 0.0f, dst.data,
           dst.ld);
    for (std::int64_t r = 0; r < real; ++r) {
      float* row = dst.data + r * dst.ld;
      for (std::int64_t x = 0; x < d; ++x) row[x] *= inv_sum[r];
      write_row(row, r, dst.in_place);
    }
    write_empty_rows(real);
  });
}

}  // namespace

void forward(const ForwardParams& p, const ProblemShape& s, float scale) {
  check_listed_keys(p.in, s);
  with_element_type(p.in.q.dtype, [&](auto element) { forward_typed<decltype(element)>(p, s, scale); });
}

}  // namespace vsa::cpu
