// The VSA layer's gate combine fused into the CPU forward's epilogue
// (ForwardParams::coarse, gate, fine): bitwise the forward followed by
// gate_combine, and the kept attention bitwise the plain forward's out, over
// the shared case matrix (dtypes, layouts, blocks 64 and 128, D 64 and 128,
// GQA, padded views, partial and empty blocks, empty rows), with and without
// a gate; and the arguments it refuses, with out, lse and fine untouched.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>

#include "attention_cases.hpp"
#include "support/expect_error.hpp"
#include "support/fused_combine.hpp"
#include "vsa/layer.hpp"

namespace vsa::test {
namespace {

class FusedGateCombine : public ::testing::TestWithParam<std::tuple<AttentionCase, AddendKind>> {};

TEST_P(FusedGateCombine, IsBitwiseForwardThenGateCombine) {
  const auto& [spec, kind] = GetParam();
  const std::uint64_t seed = next_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  AttentionProblem problem(spec, seed);
  std::mt19937_64 rng(seed + 1);
  CombineAddend addend = draw_combine_addend(problem, rng, kind);
  expect_fused_combine_matches(problem, addend, [&](CombinePath path) {
    ForwardParams p = problem.forward_params(true);
    if (path == CombinePath::fused) {
      p.coarse = addend.coarse.ref();
      p.gate = addend.gate_ref();
      p.fine = addend.fine_ref();
    }
    forward(p);
    if (path == CombinePath::forward_then_combine)
      gate_combine({problem.out.ref(), addend.coarse.ref(), addend.gate_ref(), problem.out.ref(), spec.layout,
                    nullptr});
  });
}

std::string fused_case_name(const ::testing::TestParamInfo<std::tuple<AttentionCase, AddendKind>>& info) {
  return std::get<0>(info.param).name + "_" + addend_kind_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Cases, FusedGateCombine,
                         ::testing::Combine(::testing::ValuesIn(attention_cases()),
                                            ::testing::Values(AddendKind::no_gate, AddendKind::gated,
                                                              AddendKind::gated_keeping_fine)),
                         fused_case_name);

TEST(FusedGateCombineRejects, BadAddendsAndWritesNothing) {
  AttentionCase c;
  c.dtype = DType::bf16;
  AttentionProblem problem(c, next_seed());
  std::mt19937_64 rng(next_seed());
  const CombineAddend addend = draw_combine_addend(problem, rng, true);
  const std::int64_t nq = c.num_q_blocks;
  const HostTensor coarse_nq_plus_1(DType::f32, {c.batch, c.heads, nq + 1, c.head_dim});
  const HostTensor coarse_rank3(DType::f32, {c.batch, c.heads, nq * c.head_dim});
  const HostTensor coarse_f16(DType::f16, {c.batch, c.heads, nq, c.head_dim});
  const HostTensor coarse_strided =
      HostTensor::with_row_pitch(DType::f32, {c.batch, c.heads, nq, c.head_dim}, c.head_dim + 4);
  const HostTensor gate_f16(DType::f16, problem.q.shape());
  const HostTensor gate_short(DType::bf16, {c.batch, c.heads, c.seq_q() - 64, c.head_dim});
  HostTensor fine(DType::bf16, problem.q.shape()), fine_f16(DType::f16, problem.q.shape());
  fine.poison();

  const std::tuple<const char*, TensorRef, TensorRef, TensorRef> bad[] = {
      {"coarse.shape", coarse_nq_plus_1.ref(), addend.gate_ref(), TensorRef{}},
      {"coarse", coarse_rank3.ref(), addend.gate_ref(), TensorRef{}},
      {"coarse.dtype", coarse_f16.ref(), addend.gate_ref(), TensorRef{}},
      {"coarse.stride", coarse_strided.ref(), addend.gate_ref(), TensorRef{}},
      {"gate.dtype", addend.coarse.ref(), gate_f16.ref(), TensorRef{}},
      {"gate.shape", addend.coarse.ref(), gate_short.ref(), TensorRef{}},
      {"gate", TensorRef{}, addend.gate_ref(), TensorRef{}},  // a gate without coarse
      {"fine.dtype", addend.coarse.ref(), addend.gate_ref(), fine_f16.ref()},
      {"fine.shape", addend.coarse.ref(), addend.gate_ref(), gate_short.ref()},
      {"fine", TensorRef{}, TensorRef{}, fine.ref()},  // the attention kept without a combine
      {"coarse.dtype", coarse_f16.ref(), addend.gate_ref(), fine.ref()},
  };
  for (const auto& [argument, coarse, gate, kept] : bad) {
    ForwardParams p = problem.forward_params(true);
    p.coarse = coarse;
    p.gate = gate;
    p.fine = kept;
    expect_error_on(argument, [&] { forward(p); });
    EXPECT_TRUE(problem.out.untouched()) << argument;
    EXPECT_TRUE(problem.lse.untouched()) << argument;
    EXPECT_TRUE(fine.untouched()) << argument;
  }
}

}  // namespace
}  // namespace vsa::test
