#include "support/mean_grad_addends.hpp"

#include <cstdint>
#include <vector>

namespace vsa::test {
namespace {

// The mean of `heads` × `blocks` rows and what it adds to a [B, heads, blocks · blk, D] gradient,
// given each block's count of valid rows.
void draw_one(std::mt19937_64& rng, const AttentionCase& c, std::int64_t heads, std::int64_t blocks,
              const std::vector<std::int64_t>& counts, HostTensor& mean, std::vector<double>& added) {
  mean = HostTensor(DType::f32, {c.batch, heads, blocks, c.head_dim});
  mean.fill_random(rng);
  added.assign(static_cast<std::size_t>(c.batch * heads * blocks * c.block * c.head_dim), 0.0);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t n = 0; n < blocks; ++n)
        for (std::int64_t r = 0; r < counts[n]; ++r)
          for (std::int64_t d = 0; d < c.head_dim; ++d)
            added[static_cast<std::size_t>((((b * heads + h) * blocks + n) * c.block + r) * c.head_dim + d)] =
                mean.get(mean.flat_index(b, h, n, d)) / static_cast<double>(counts[n]);
}

}  // namespace

void MeanGradAddends::set_on(BackwardParams& p) const {
  if (dq_mean.numel() > 0) p.dq_mean = dq_mean.ref();
  if (dk_mean.numel() > 0) p.dk_mean = dk_mean.ref();
  if (dv_mean.numel() > 0) p.dv_mean = dv_mean.ref();
}

MeanGradAddends draw_mean_grad_addends(const AttentionProblem& problem, std::mt19937_64& rng, bool dq, bool dk,
                                       bool dv) {
  const AttentionCase& c = problem.spec();
  std::vector<std::int64_t> q_counts(static_cast<std::size_t>(c.num_q_blocks), c.block);
  if (c.q_padding)
    for (std::int64_t n = 0; n < c.num_q_blocks; ++n) q_counts[n] = problem.q_vbs.get_int(n);
  std::vector<std::int64_t> kv_counts(static_cast<std::size_t>(c.num_kv_blocks));
  for (std::int64_t n = 0; n < c.num_kv_blocks; ++n) kv_counts[n] = problem.vbs.get_int(n);
  MeanGradAddends a;
  const auto zeros = [&](std::int64_t heads, std::int64_t seq) {
    return std::vector<double>(static_cast<std::size_t>(c.batch * heads * seq * c.head_dim), 0.0);
  };
  a.added = {zeros(c.heads, c.seq_q()), zeros(c.kv_heads, c.seq_kv()), zeros(c.kv_heads, c.seq_kv())};
  if (dq) draw_one(rng, c, c.heads, c.num_q_blocks, q_counts, a.dq_mean, a.added.dq);
  if (dk) draw_one(rng, c, c.kv_heads, c.num_kv_blocks, kv_counts, a.dk_mean, a.added.dk);
  if (dv) draw_one(rng, c, c.kv_heads, c.num_kv_blocks, kv_counts, a.dv_mean, a.added.dv);
  return a;
}

}  // namespace vsa::test
