// CPU gate combine and its gradient (vsa/layer.hpp): one work item per
// (batch, head, query block), float32 arithmetic, one rounding per output
// (combine_row.hpp, shared with the forward's fused epilogue).
#include <cstdint>
#include <vector>

#include "cpu/combine_row.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/parallel_for.hpp"
#include "cpu/sequence_rows.hpp"

namespace vsa::cpu {
namespace {

template <class T>
void gate_combine_typed(const GateCombineParams& p) {
  const auto fine = sequence_rows<const T>(p.fine, p.layout);
  const auto out = sequence_rows<T>(p.out, p.layout);
  const bool gated = p.gate.defined();
  const auto gate = sequence_rows<const T>(p.gate, p.layout);
  const std::int64_t heads = fine.view.heads, dim = fine.view.dim, blocks = p.coarse.shape[2];
  const std::int64_t block = fine.view.seq / blocks;
  const auto* coarse = static_cast<const float*>(p.coarse.data);
  parallel_for(fine.view.batch * heads * blocks, [&](std::int64_t item) {
    const std::int64_t b = item / blocks / heads, h = item / blocks % heads, n = item % blocks;
    const float* c = coarse + item * dim;
    for (std::int64_t t = n * block; t < (n + 1) * block; ++t) {
      const T* f = fine.row(b, h, t);
      const T* g = gated ? gate.row(b, h, t) : nullptr;
      combine_row(f, c, g, out.row(b, h, t), dim);  // out may be fine
    }
  });
}

template <class T>
void gate_combine_backward_typed(const GateCombineBackwardParams& p) {
  const auto dout = sequence_rows<const T>(p.dout, p.layout);
  const bool gated = p.gate.defined();
  const auto gate = sequence_rows<const T>(p.gate, p.layout);
  const auto dgate = sequence_rows<T>(p.dgate, p.layout);
  const std::int64_t heads = dout.view.heads, dim = dout.view.dim, blocks = p.coarse.shape[2];
  const std::int64_t block = dout.view.seq / blocks;
  const auto* coarse = static_cast<const float*>(p.coarse.data);
  auto* dcoarse = static_cast<float*>(p.dcoarse.data);
  parallel_for(dout.view.batch * heads * blocks, [&](std::int64_t item) {
    const std::int64_t b = item / blocks / heads, h = item / blocks % heads, n = item % blocks;
    const float* c = coarse + item * dim;
    std::vector<float> sum(static_cast<std::size_t>(dim), 0.0f);
    for (std::int64_t t = n * block; t < (n + 1) * block; ++t) {
      const T* g_out = dout.row(b, h, t);
      for (std::int64_t d = 0; d < dim; ++d) {
        const float grad = to_float(g_out[d]);
        if (!gated) {
          sum[d] += grad;
          continue;
        }
        sum[d] += grad * to_float(gate.row(b, h, t)[d]);
        dgate.row(b, h, t)[d] = from_float<T>(grad * c[d]);
      }
    }
    for (std::int64_t d = 0; d < dim; ++d) dcoarse[item * dim + d] = sum[d];
  });
}

}  // namespace

void gate_combine(const GateCombineParams& p) {
  with_element_type(p.fine.dtype, [&](auto element) { gate_combine_typed<decltype(element)>(p); });
}

void gate_combine_backward(const GateCombineBackwardParams& p) {
  with_element_type(p.dout.dtype, [&](auto element) { gate_combine_backward_typed<decltype(element)>(p); });
}

}  // namespace vsa::cpu
