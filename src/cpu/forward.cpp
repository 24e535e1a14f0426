// CPU forward pass: each query block is one work item. Its rows get an exact
// (not online) base-2 softmax over the gathered keys, accumulated in float;
// the two matrix products go through gemm.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/gemm.hpp"
#include "cpu/parallel_for.hpp"
#include "cpu/selected_keys.hpp"

namespace vsa::cpu {
namespace {

// Softmax statistics and unnormalized output of one query block's rows.
struct BlockResult {
  std::vector<float> acc;               // [rows, D]: sum_l 2^(s_l - max) v_l
  std::vector<float> row_max, row_sum;  // [rows], base-2 scores
};

// Sᵀ = K·Qᵀ puts each key's scores for all query rows side by side, so the
// softmax statistics are elementwise over rows (vectorized) and no key
// matrix needs transposing; O = P·V then reads P from Sᵀ column-wise. Keys
// past the count are zero rows of the padded gather and get zero weight.
BlockResult attend(const std::vector<float>& queries, const SelectedKeys& sel, std::int64_t rows,
                   std::int64_t d, float scale_log2) {
  BlockResult res{std::vector<float>(static_cast<std::size_t>(rows * d), 0.0f),
                  std::vector<float>(static_cast<std::size_t>(rows), -std::numeric_limits<float>::infinity()),
                  std::vector<float>(static_cast<std::size_t>(rows), 0.0f)};
  if (sel.count == 0) return res;

  const std::vector<float> queries_t = transposed(queries.data(), rows, d);  // Qᵀ [d, rows]
  std::vector<float> probs(static_cast<std::size_t>(sel.padded * rows));  // Sᵀ, then Pᵀ [keys, rows]
  gemm<Layout2d::row_major>(sel.padded, rows, d, scale_log2, sel.keys.data(), d, queries_t.data(), rows,
                            probs.data(), rows);

  float* row_max = res.row_max.data();
  float* row_sum = res.row_sum.data();
  for (std::int64_t l = 0; l < sel.count; ++l)
    for (std::int64_t r = 0; r < rows; ++r) row_max[r] = std::max(row_max[r], probs[l * rows + r]);
  for (std::int64_t l = 0; l < sel.count; ++l) {
    float* p = probs.data() + l * rows;
    for (std::int64_t r = 0; r < rows; ++r) {
      p[r] = std::exp2(p[r] - row_max[r]);
      row_sum[r] += p[r];
    }
  }
  std::fill(probs.begin() + sel.count * rows, probs.end(), 0.0f);

  gemm<Layout2d::col_major>(rows, d, sel.padded, 1.0f, probs.data(), rows, sel.values.data(), d,
                            res.acc.data(), d);
  return res;
}

template <class T>
void forward_typed(const ForwardParams& p, const ProblemShape& s, float scale) {
  const auto q = sequence_rows<const T>(p.in.q, p.in.layout);
  const auto k = sequence_rows<const T>(p.in.k, p.in.layout);
  const auto v = sequence_rows<const T>(p.in.v, p.in.layout);
  const auto out = sequence_rows<T>(p.out, p.in.layout);
  float* lse = p.need_lse ? static_cast<float*>(p.lse.data) : nullptr;
  const std::int64_t d = s.head_dim, rows = s.block;

  parallel_for(s.batch * s.heads * s.num_q_blocks, [&](std::int64_t item) {
    const QueryBlock qb = query_block(item, s);
    const std::int64_t first_seq = qb.index * s.block;
    const SelectedKeys sel = gather_selected_keys(k, v, p.in, s, qb);
    std::vector<float> queries(static_cast<std::size_t>(rows * d));
    if (sel.count > 0)
      for (std::int64_t r = 0; r < rows; ++r)
        load_row(q.row(qb.batch, qb.head, first_seq + r), queries.data() + r * d, d);
    BlockResult res = attend(queries, sel, rows, d, scale * kLog2e);

    // A row with nothing to attend keeps its all-zero accumulator and gets
    // the sentinel LSE.
    const bool empty = sel.count == 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      float* row = res.acc.data() + r * d;
      if (!empty)
        for (std::int64_t x = 0; x < d; ++x) row[x] /= res.row_sum[r];
      store_row(row, out.row(qb.batch, qb.head, first_seq + r), d);
      if (lse != nullptr)
        lse[(qb.batch * s.heads + qb.head) * s.seq_q + first_seq + r] =
            empty ? kEmptyRowLse : res.row_max[r] + std::log2(res.row_sum[r]);
    }
  });
}

}  // namespace

void forward(const ForwardParams& p, const ProblemShape& s, float scale) {
  with_element_type(p.in.q.dtype, [&](auto element) { forward_typed<decltype(element)>(p, s, scale); });
}

}  // namespace vsa::cpu
