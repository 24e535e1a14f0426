// CPU coarse stage (vsa/layer.hpp): one work item per (batch, head, query
// block) row. Scores and the selection follow layer_arithmetic.hpp (exact
// integer dot products of the means in block floating point), so the block
// lists are bit-identical to the CUDA backend's; the softmax and the product
// with the value means run in float64.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/layer_arithmetic.hpp"
#include "core/layout.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/parallel_for.hpp"

namespace vsa::cpu {
namespace {

// The `take` live blocks of largest score (ties to the lower id), ascending.
std::vector<std::int64_t> select_blocks(const std::vector<float>& scores,
                                        const std::vector<std::int64_t>& live, std::int64_t take) {
  std::vector<std::int64_t> ids = live;
  const auto before = [&](std::int64_t a, std::int64_t b) {
    const std::uint32_t ka = detail::score_key(scores[a]), kb = detail::score_key(scores[b]);
    return ka != kb ? ka > kb : a < b;
  };
  std::partial_sort(ids.begin(), ids.begin() + take, ids.end(), before);
  ids.resize(static_cast<std::size_t>(take));
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Means in block floating point (layer_arithmetic.hpp): each vector of `dim` as integers
// with its own exponent, and whether it is finite (a vector with an inf or NaN scores NaN).
struct QuantizedMeans {
  std::vector<std::int32_t> q;
  std::vector<int> exponent;
  std::vector<char> finite;
};

QuantizedMeans quantize_vectors(const float* x, std::int64_t vectors, std::int64_t dim) {
  QuantizedMeans out;
  out.q.assign(static_cast<std::size_t>(vectors * dim), 0);
  out.exponent.assign(static_cast<std::size_t>(vectors), 0);
  out.finite.assign(static_cast<std::size_t>(vectors), 1);
  for (std::int64_t v = 0; v < vectors; ++v) {
    const float* row = x + v * dim;
    detail::MagnitudeRange range;
    for (std::int64_t d = 0; d < dim; ++d) range.add(row[d]);
    const int exponent = detail::magnitude_exponent(range.largest);
    out.exponent[static_cast<std::size_t>(v)] = exponent;
    out.finite[static_cast<std::size_t>(v)] = range.finite;
    if (range.finite)
      for (std::int64_t d = 0; d < dim; ++d)
        out.q[static_cast<std::size_t>(v * dim + d)] = detail::quantize_mean(row[d], exponent);
  }
  return out;
}

}  // namespace

void coarse_stage(const CoarseStageParams& p, float scale) {
  const std::int64_t heads = p.q_mean.shape[1], nq = p.q_mean.shape[2], dim = p.q_mean.shape[3];
  const std::int64_t kv_heads = p.k_mean.shape[1], nk = p.k_mean.shape[2];
  const std::int64_t topk = p.q2k_idx.shape[3], group = heads / kv_heads;
  const auto* q_mean = static_cast<const float*>(p.q_mean.data);
  const auto* k_mean = static_cast<const float*>(p.k_mean.data);
  const auto* v_mean = static_cast<const float*>(p.v_mean.data);
  auto* coarse = static_cast<float*>(p.coarse_out.data);

  std::vector<std::int64_t> live;
  for (std::int64_t j = 0; j < nk; ++j)
    if (detail::load_int(p.variable_block_sizes, j) > 0) live.push_back(j);
  const auto take = std::min<std::int64_t>(topk, static_cast<std::int64_t>(live.size()));

  // The key means of each (batch, KV head), quantized once.
  std::vector<QuantizedMeans> keys(static_cast<std::size_t>(p.k_mean.shape[0] * kv_heads));
  parallel_for(static_cast<std::int64_t>(keys.size()), [&](std::int64_t bkv) {
    keys[static_cast<std::size_t>(bkv)] = quantize_vectors(k_mean + bkv * nk * dim, nk, dim);
  });

  parallel_for(p.q_mean.shape[0] * heads * nq, [&](std::int64_t row) {
    const std::int64_t bh = row / nq, batch = bh / heads, head = bh % heads;
    const std::int64_t bkv = batch * kv_heads + head / group;
    const float* v = v_mean + bkv * nk * dim;
    const QuantizedMeans query = quantize_vectors(q_mean + row * dim, 1, dim);
    const QuantizedMeans& key = keys[static_cast<std::size_t>(bkv)];

    // scores: what the row ranks and its softmax takes.
    std::vector<float> scores(static_cast<std::size_t>(nk));
    for (std::int64_t j = 0; j < nk; ++j) {
      std::int64_t sum = 0;
      for (std::int64_t d = 0; d < dim; ++d)
        sum += static_cast<std::int64_t>(query.q[static_cast<std::size_t>(d)]) * key.q[static_cast<std::size_t>(j * dim + d)];
      const auto jj = static_cast<std::size_t>(j);
      const int shift = detail::score_shift(query.exponent[0], key.exponent[jj]);
      scores[jj] = query.finite[0] && key.finite[jj] ? detail::score_rank(sum, shift) : NAN;
    }

    const std::vector<std::int64_t> chosen = select_blocks(scores, live, take);
    for (std::int64_t e = 0; e < topk; ++e) detail::store_int(p.q2k_idx, row * topk + e, e < take ? chosen[e] : -1);
    detail::store_int(p.q2k_num, row, take);

    std::vector<double> out(static_cast<std::size_t>(dim), 0.0);
    if (!live.empty()) {
      double top = -INFINITY, total = 0.0;
      for (std::int64_t j : live) top = std::max(top, static_cast<double>(scores[j]));
      for (std::int64_t j : live) {
        const double weight = std::exp((scores[j] - top) * scale);
        total += weight;
        for (std::int64_t d = 0; d < dim; ++d) out[d] += weight * v[j * dim + d];
      }
      for (double& o : out) o /= total;
    }
    for (std::int64_t d = 0; d < dim; ++d) coarse[row * dim + d] = static_cast<float>(out[d]);
  });
}

}  // namespace vsa::cpu
