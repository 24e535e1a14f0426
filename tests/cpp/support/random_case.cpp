#include "support/random_case.hpp"

#include <cmath>
#include <cstdlib>

namespace vsa::test {
namespace {

template <class T>
T pick(std::mt19937_64& rng, std::initializer_list<T> values) {
  std::uniform_int_distribution<std::size_t> at(0, values.size() - 1);
  return values.begin()[at(rng)];
}

std::int64_t between(std::mt19937_64& rng, std::int64_t low, std::int64_t high) {
  return std::uniform_int_distribution<std::int64_t>(low, high)(rng);
}

bool one_in(std::mt19937_64& rng, int n) { return between(rng, 1, n) == 1; }

std::int64_t env_int(const char* variable) {
  const char* text = std::getenv(variable);
  if (text == nullptr) return -1;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  return end != text && *end == '\0' ? value : -1;
}

}  // namespace

AttentionCase random_attention_case(std::mt19937_64& rng, SweepBackend backend) {
  AttentionCase c;
  c.name = "random";
  c.dtype = backend == SweepBackend::cuda ? pick(rng, {DType::bf16, DType::f16})
                                          : pick(rng, {DType::f32, DType::bf16, DType::f16});
  c.layout = pick(rng, {Layout::bhsd, Layout::bshd});
  c.block = pick<std::int64_t>(rng, {64, 128});
  c.head_dim = pick<std::int64_t>(rng, {64, 128});
  c.batch = between(rng, 1, 2);
  c.kv_heads = between(rng, 1, 2);
  c.heads = c.kv_heads * between(rng, 1, 3);  // GQA groups of 1 to 3
  c.num_q_blocks = between(rng, 1, 4);
  c.num_kv_blocks = between(rng, 1, 5);
  c.max_kv = between(rng, 1, c.num_kv_blocks + 2);  // up to wider than NK
  c.idx_dtype = pick(rng, {DType::i32, DType::i64});
  c.num_dtype = pick(rng, {DType::i32, DType::i64});
  c.vbs_dtype = pick(rng, {DType::i32, DType::i64});
  c.padded_rows = one_in(rng, 4);
  c.duplicates = one_in(rng, 4);
  c.q_padding = one_in(rng, 3);
  c.q_vbs_dtype = pick(rng, {DType::i32, DType::i64});
  // A third of the cases get a custom scale, within 2x of the default
  // 1/sqrt(D) as models use. Much sharper softmaxes (5x the default) put
  // bf16 dq/dk past 1e-2 of the float64 gradient: the backward's delta =
  // rowsum(dout * out) reads out rounded to bf16, and dp - delta cancels.
  const double default_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  c.scale = one_in(rng, 3) ? static_cast<float>(default_scale *
                                                std::uniform_real_distribution<double>(0.5, 2.0)(rng))
                           : 0.0f;
  return c;
}

void randomize_block_sizes(AttentionProblem& problem, std::mt19937_64& rng) {
  const AttentionCase& c = problem.spec();
  for (std::int64_t j = 0; j < c.num_kv_blocks; ++j) {
    const std::int64_t kind = between(rng, 0, 3);  // full, empty, partial, partial
    problem.set_vbs(j, kind == 0 ? c.block : kind == 1 ? 0 : between(rng, 1, c.block - 1));
  }
}

std::string describe(const AttentionCase& c) {
  const auto s = [](std::int64_t v) { return std::to_string(v); };
  return std::string(dtype_name(c.dtype)) + (c.layout == Layout::bhsd ? " bhsd" : " bshd") + " B" +
         s(c.batch) + " H" + s(c.heads) + " Hkv" + s(c.kv_heads) + " NQ" + s(c.num_q_blocks) + " NK" +
         s(c.num_kv_blocks) + " blk" + s(c.block) + " D" + s(c.head_dim) + " max_kv" + s(c.max_kv) +
         " idx/num/vbs " + dtype_name(c.idx_dtype) + "/" + dtype_name(c.num_dtype) + "/" +
         dtype_name(c.vbs_dtype) + (c.padded_rows ? " padded-rows" : "") +
         (c.duplicates ? " duplicates" : "") +
         (c.q_padding ? std::string(" q-padding ") + dtype_name(c.q_vbs_dtype) : std::string()) + " scale " +
         std::to_string(c.scale);
}

std::int64_t sweep_cases(const char* variable, std::int64_t fallback) {
  const std::int64_t n = env_int(variable);
  return n > 0 ? n : fallback;
}

std::uint64_t sweep_seed() {
  const std::int64_t seed = env_int("VSA_SWEEP_SEED");
  if (seed >= 0) return static_cast<std::uint64_t>(seed);
  // 62 bits, so the seed of any case (seed + i) reads back through VSA_SWEEP_SEED.
  const std::uint64_t fresh = (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  return fresh >> 2;
}

}  // namespace vsa::test
