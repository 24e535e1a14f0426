// The smallest use of the vsa C++ API: one batch, two heads, four 64-token
// blocks, each query block attending to itself and block 0, on the CPU.
#include <cmath>
#include <cstdio>
#include <vector>
#include <vsa/vsa.hpp>

int main() {
  constexpr std::int64_t batch = 1, heads = 2, blocks = 4, block = 64, dim = 64, max_kv = 2;
  constexpr std::int64_t seq = blocks * block;

  std::vector<float> q(batch * heads * seq * dim), k(q.size()), v(q.size()), out(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) {  // smooth deterministic inputs
    q[i] = std::sin(0.01f * static_cast<float>(i));
    k[i] = std::cos(0.02f * static_cast<float>(i));
    v[i] = std::sin(0.03f * static_cast<float>(i) + 1.0f);
  }
  std::vector<std::int32_t> q2k_idx, q2k_num;
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t i = 0; i < blocks; ++i) {
      q2k_idx.push_back(static_cast<std::int32_t>(i));
      q2k_idx.push_back(i == 0 ? -1 : 0);  // block 0 lists only itself
      q2k_num.push_back(i == 0 ? 1 : 2);
    }
  }
  std::vector<std::int32_t> vbs = {64, 64, 64, 40};  // the last block is partial
  std::vector<float> lse(batch * heads * seq);

  using vsa::DType;
  using vsa::TensorRef;
  vsa::ForwardParams p;
  p.in.q = TensorRef::contiguous(q.data(), DType::f32, {batch, heads, seq, dim});
  p.in.k = TensorRef::contiguous(k.data(), DType::f32, {batch, heads, seq, dim});
  p.in.v = TensorRef::contiguous(v.data(), DType::f32, {batch, heads, seq, dim});
  p.in.q2k_idx = TensorRef::contiguous(q2k_idx.data(), DType::i32, {batch, heads, blocks, max_kv});
  p.in.q2k_num = TensorRef::contiguous(q2k_num.data(), DType::i32, {batch, heads, blocks});
  p.in.variable_block_sizes = TensorRef::contiguous(vbs.data(), DType::i32, {blocks});
  p.out = TensorRef::contiguous(out.data(), DType::f32, {batch, heads, seq, dim});
  p.lse = TensorRef::contiguous(lse.data(), DType::f32, {batch, heads, seq});

  try {
    vsa::forward(p);
  } catch (const vsa::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }

  float max_abs = 0.0f;
  for (float x : out) max_abs = std::fmax(max_abs, std::fabs(x));
  // Each output row is a convex combination of v rows, so 0 < max |out| <= 1;
  // the lse (base 2) of a row over 64 keys sits near log2(64) = 6 plus the
  // largest scaled score.
  std::printf("max |out| = %.6f\nlse of row 0 = %.6f\n", max_abs, lse[0]);
  const bool sane = std::isfinite(lse[0]) && max_abs > 0.0f && max_abs <= 1.0f + 1e-6f;
  std::printf("%s\n", sane ? "ok" : "unexpected result");
  return sane ? 0 : 1;
}
