// CPU block means and their gradient (vsa/layer.hpp). One work item per
// (batch, head, block); the float64 sums follow layer_arithmetic.hpp, so the
// means are bit-identical to the CUDA backend's.
#include <cstdint>
#include <vector>

#include "core/layer_arithmetic.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/parallel_for.hpp"
#include "cpu/sequence_rows.hpp"

namespace vsa::cpu {
namespace {

// Splits a flat (batch, head, block) item.
struct BlockItem {
  std::int64_t batch, head, block;
};

BlockItem block_item(std::int64_t item, std::int64_t heads, std::int64_t blocks) {
  return BlockItem{item / blocks / heads, item / blocks % heads, item % blocks};
}

template <class T>
void block_mean_typed(const BlockMeanParams& p) {
  const auto x = sequence_rows<const T>(p.x, p.layout);
  const std::int64_t blocks = p.valid_counts.shape[0], block = x.view.seq / blocks, dim = x.view.dim;
  auto* mean = static_cast<float*>(p.mean.data);
  parallel_for(x.view.batch * x.view.heads * blocks, [&](std::int64_t item) {
    const BlockItem at = block_item(item, x.view.heads, blocks);
    const std::int64_t count = detail::load_int(p.valid_counts, at.block);
    std::vector<double> sum(static_cast<std::size_t>(dim), 0.0);
    for (std::int64_t t = 0; t < count; ++t) {
      const T* row = x.row(at.batch, at.head, at.block * block + t);
      for (std::int64_t d = 0; d < dim; ++d) sum[d] = detail::mean_sum_step(sum[d], to_float(row[d]));
    }
    for (std::int64_t d = 0; d < dim; ++d) mean[item * dim + d] = detail::mean_from_sum(sum[d], count);
  });
}

template <class T>
void block_mean_backward_typed(const BlockMeanBackwardParams& p) {
  const auto dx = sequence_rows<T>(p.dx, p.layout);
  const std::int64_t blocks = p.valid_counts.shape[0], block = dx.view.seq / blocks, dim = dx.view.dim;
  const auto* dmean = static_cast<const float*>(p.dmean.data);
  parallel_for(dx.view.batch * dx.view.heads * blocks, [&](std::int64_t item) {
    const BlockItem at = block_item(item, dx.view.heads, blocks);
    const std::int64_t count = detail::load_int(p.valid_counts, at.block);
    const float* grad = dmean + item * dim;
    for (std::int64_t t = 0; t < block; ++t) {
      T* row = dx.row(at.batch, at.head, at.block * block + t);
      for (std::int64_t d = 0; d < dim; ++d)
        row[d] = from_float<T>(t < count ? grad[d] / static_cast<float>(count) : 0.0f);
    }
  });
}

}  // namespace

void block_mean(const BlockMeanParams& p) {
  with_element_type(p.x.dtype, [&](auto element) { block_mean_typed<decltype(element)>(p); });
}

void block_mean_backward(const BlockMeanBackwardParams& p) {
  with_element_type(p.dx.dtype, [&](auto element) { block_mean_backward_typed<decltype(element)>(p); });
}

}  // namespace vsa::cpu
