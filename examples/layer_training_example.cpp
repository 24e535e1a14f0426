// One training step of the VSA layer through the C++ API alone, as an engine
// without Python runs it (here on the CPU; on CUDA the same calls take device
// tensors, a stream and the two workspaces the *_workspace_bytes queries size):
//
//   forward:  block_means -> coarse_stage -> forward with the gate combine
//             fused (out, and the attention alone for the backward)
//   backward: gate_combine_backward -> coarse_stage_backward -> backward,
//             which adds the block means' gradients to dq, dk and dv as it
//             writes them
//
// The loss is sum(out * w), so dout = w. The example checks the gradients it
// got against a central difference of the loss along one direction of q, k
// and v together: in float32, at a step of 5e-3, the difference carries the
// loss's rounding over the step and the curvature times the step squared, so
// it is checked to 2 %; the tests compare the layer's gradients with a float64
// reference far more tightly (tests/python/test_layer.py).
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>
#include <vsa/vsa.hpp>

namespace {

using vsa::DType;
using vsa::TensorRef;

constexpr std::int64_t kBatch = 1, kHeads = 2, kBlocks = 6, kBlock = 64, kDim = 64, kTopk = 3;
constexpr std::int64_t kSeq = kBlocks * kBlock;

// q/k/v-shaped [B, H, S, D] and block-mean-shaped [B, H, N, D] float32 views.
TensorRef tokens(std::vector<float>& x) {
  return TensorRef::contiguous(x.data(), DType::f32, {kBatch, kHeads, kSeq, kDim});
}
TensorRef means(std::vector<float>& x) {
  return TensorRef::contiguous(x.data(), DType::f32, {kBatch, kHeads, kBlocks, kDim});
}

struct Layer {
  std::vector<std::int32_t> vbs;  // valid tokens per block, the same for queries and keys
  std::vector<float> q_mean, k_mean, v_mean, coarse, fine, out, lse;
  std::vector<std::int32_t> q2k_idx, q2k_num;

  explicit Layer(std::vector<std::int32_t> sizes)
      : vbs(std::move(sizes)), q_mean(kBatch * kHeads * kBlocks * kDim), k_mean(q_mean.size()),
        v_mean(q_mean.size()), coarse(q_mean.size()), fine(kBatch * kHeads * kSeq * kDim), out(fine.size()),
        lse(kBatch * kHeads * kSeq), q2k_idx(kBatch * kHeads * kBlocks * kTopk), q2k_num(kBatch * kHeads * kBlocks) {}

  TensorRef sizes() { return TensorRef::contiguous(vbs.data(), DType::i32, {kBlocks}); }

  vsa::AttentionInputs inputs(std::vector<float>& q, std::vector<float>& k, std::vector<float>& v) {
    vsa::AttentionInputs in;
    in.q = tokens(q);
    in.k = tokens(k);
    in.v = tokens(v);
    in.q2k_idx = TensorRef::contiguous(q2k_idx.data(), DType::i32, {kBatch, kHeads, kBlocks, kTopk});
    in.q2k_num = TensorRef::contiguous(q2k_num.data(), DType::i32, {kBatch, kHeads, kBlocks});
    in.variable_block_sizes = sizes();
    in.q_variable_block_sizes = sizes();  // the sequence's padding tokens are padding queries too
    return in;
  }

  void forward(std::vector<float>& q, std::vector<float>& k, std::vector<float>& v) {
    vsa::block_means({{tokens(q), sizes(), means(q_mean)}, {tokens(k), sizes(), means(k_mean)},
                      {tokens(v), sizes(), means(v_mean)}});
    vsa::CoarseStageParams c;
    c.q_mean = means(q_mean);
    c.k_mean = means(k_mean);
    c.v_mean = means(v_mean);
    c.variable_block_sizes = sizes();
    c.coarse_out = means(coarse);
    c.q2k_idx = TensorRef::contiguous(q2k_idx.data(), DType::i32, {kBatch, kHeads, kBlocks, kTopk});
    c.q2k_num = TensorRef::contiguous(q2k_num.data(), DType::i32, {kBatch, kHeads, kBlocks});
    vsa::coarse_stage(c);
    vsa::ForwardParams f;
    f.in = inputs(q, k, v);
    f.out = tokens(out);
    f.lse = TensorRef::contiguous(lse.data(), DType::f32, {kBatch, kHeads, kSeq});
    f.coarse = means(coarse);  // out = fine + coarse (no gate) ...
    f.fine = tokens(fine);     // ... and fine itself, which the backward reads
    vsa::forward(f);
  }

  // dq, dk, dv of sum(out * w) at the last forward's inputs.
  void backward(std::vector<float>& q, std::vector<float>& k, std::vector<float>& v, std::vector<float>& w,
                std::vector<float>& dq, std::vector<float>& dk, std::vector<float>& dv) {
    std::vector<float> dcoarse(coarse.size()), dq_mean(coarse.size()), dk_mean(coarse.size()), dv_mean(coarse.size());
    vsa::gate_combine_backward({tokens(w), means(coarse), TensorRef{}, means(dcoarse), TensorRef{}});
    vsa::coarse_stage_backward({means(q_mean), means(k_mean), means(v_mean), sizes(), 0.0f, means(coarse),
                                means(dcoarse), means(dq_mean), means(dk_mean), means(dv_mean)});
    vsa::BackwardParams b;
    b.in = inputs(q, k, v);
    b.out = tokens(fine);  // out = fine + coarse: the fine stage's dout is w itself
    b.lse = TensorRef::contiguous(lse.data(), DType::f32, {kBatch, kHeads, kSeq});
    b.dout = tokens(w);
    b.dq = tokens(dq);
    b.dk = tokens(dk);
    b.dv = tokens(dv);
    b.dq_mean = means(dq_mean);  // the block means' gradients, added to each block's valid rows
    b.dk_mean = means(dk_mean);
    b.dv_mean = means(dv_mean);
    vsa::backward(b);
  }
};

double loss(const std::vector<float>& out, const std::vector<float>& w) {
  double sum = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out[i]) * w[i];
  return sum;
}

}  // namespace

int main() {
  const std::size_t n = kBatch * kHeads * kSeq * kDim;
  std::vector<float> q(n), k(n), v(n), w(n), u(n);
  for (std::size_t i = 0; i < n; ++i) {  // smooth deterministic inputs, a loss weight, a direction
    const auto x = static_cast<float>(i);
    q[i] = std::sin(0.013f * x);
    k[i] = std::cos(0.021f * x);
    v[i] = std::sin(0.027f * x + 1.0f);
    w[i] = std::cos(0.005f * x + 0.5f);
    u[i] = std::sin(0.7f * x + 0.3f);
  }
  Layer layer({64, 64, 64, 64, 64, 40});  // the last block is partial: 24 padding tokens

  std::vector<float> dq(n), dk(n), dv(n);
  try {
    layer.forward(q, k, v);
    layer.backward(q, k, v, w, dq, dk, dv);
  } catch (const vsa::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  double along_u = 0.0;  // the directional derivative the gradients give
  for (std::size_t i = 0; i < n; ++i) along_u += static_cast<double>(u[i]) * (dq[i] + dk[i] + dv[i]);

  // The loss at q + εu, k + εu, v + εu and at −ε: its central difference along u.
  constexpr float kEps = 5e-3f;
  double at[2];
  for (int side = 0; side < 2; ++side) {
    const float step = side == 0 ? kEps : -kEps;
    std::vector<float> qs(q), ks(k), vs(v);
    for (std::size_t i = 0; i < n; ++i) {
      qs[i] += step * u[i];
      ks[i] += step * u[i];
      vs[i] += step * u[i];
    }
    Layer moved({64, 64, 64, 64, 64, 40});
    moved.forward(qs, ks, vs);
    if (moved.q2k_idx != layer.q2k_idx) {
      std::printf("the step changed the top-k lists: pick a smaller step\n");
      return 1;
    }
    at[side] = loss(moved.out, w);
  }
  const double central = (at[0] - at[1]) / (2.0 * kEps);
  const double relative = std::fabs(central - along_u) / std::fmax(std::fabs(central), 1e-12);
  std::printf("loss = %.6f\nd loss along u: gradients %.6f, central difference %.6f (relative %.2e)\n",
              loss(layer.out, w), along_u, central, relative);
  const bool sane = std::isfinite(along_u) && relative < 2e-2;
  std::printf("%s\n", sane ? "ok" : "unexpected result");
  return sane ? 0 : 1;
}
