// CPU backward of the coarse stage (vsa/layer.hpp): dense attention's
// backward on the block means, in float64, one work item per (batch, KV head)
// with the query rows of its group taken together, so dk and dv sum over the
// group in the item that owns them (no shared writes, the same sums in the
// same order every run).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/layout.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/parallel_for.hpp"

namespace vsa::cpu {
namespace {

double dot(const float* a, const float* b, std::int64_t n) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

}  // namespace

void coarse_stage_backward(const CoarseStageBackwardParams& p, const detail::CoarseShape& c) {
  const std::int64_t group = c.heads / c.kv_heads, rows = group * c.nq, nk = c.nk, dim = c.dim;
  const auto* q_mean = static_cast<const float*>(p.q_mean.data);
  const auto* k_mean = static_cast<const float*>(p.k_mean.data);
  const auto* v_mean = static_cast<const float*>(p.v_mean.data);
  const auto* out = static_cast<const float*>(p.coarse_out.data);
  const auto* dout = static_cast<const float*>(p.dcoarse.data);
  auto* dq_mean = static_cast<float*>(p.dq_mean.data);
  auto* dk_mean = static_cast<float*>(p.dk_mean.data);
  auto* dv_mean = static_cast<float*>(p.dv_mean.data);
  const double scale = c.scale;

  std::vector<std::int64_t> live;
  for (std::int64_t j = 0; j < nk; ++j)
    if (detail::load_int(p.variable_block_sizes, j) > 0) live.push_back(j);

  // Item bkv owns rows [bkv · rows, (bkv + 1) · rows) of the [B, H, NQ, D]
  // tensors: a KV head's query heads are consecutive.
  parallel_for(c.batch * c.kv_heads, [&](std::int64_t bkv) {
    const float* k = k_mean + bkv * nk * dim;
    const float* v = v_mean + bkv * nk * dim;
    std::vector<double> dk(static_cast<std::size_t>(nk * dim), 0.0), dv(dk.size(), 0.0);
    std::vector<double> probs(static_cast<std::size_t>(nk)), dq(static_cast<std::size_t>(dim));
    for (std::int64_t r = bkv * rows; r < (bkv + 1) * rows; ++r) {
      const float* q = q_mean + r * dim;
      const float* o = out + r * dim;
      const float* g = dout + r * dim;
      double top = -INFINITY, total = 0.0;
      for (std::int64_t j : live) {
        probs[j] = dot(q, k + j * dim, dim) * scale;
        top = std::max(top, probs[j]);
      }
      for (std::int64_t j : live) total += probs[j] = std::exp(probs[j] - top);
      const double delta = dot(g, o, dim);
      std::fill(dq.begin(), dq.end(), 0.0);
      for (std::int64_t j : live) {
        const double prob = probs[j] / total;
        const double dscore = prob * (dot(g, v + j * dim, dim) - delta);
        for (std::int64_t d = 0; d < dim; ++d) {
          dq[d] += dscore * k[j * dim + d];
          dk[j * dim + d] += dscore * q[d];
          dv[j * dim + d] += prob * g[d];
        }
      }
      for (std::int64_t d = 0; d < dim; ++d) dq_mean[r * dim + d] = static_cast<float>(dq[d] * scale);
    }
    for (std::int64_t i = 0; i < nk * dim; ++i) {
      dk_mean[bkv * nk * dim + i] = static_cast<float>(dk[i] * scale);
      dv_mean[bkv * nk * dim + i] = static_cast<float>(dv[i]);
    }
  });
}

}  // namespace vsa::cpu
