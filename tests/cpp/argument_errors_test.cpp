// Every class of bad input to forward/backward: a vsa::Error naming the
// argument, and no output touched (outputs were poisoned before the call).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "attention_cases.hpp"
#include "support/attention_problem.hpp"
#include "support/expect_error.hpp"
#include "support/fused_combine.hpp"

namespace vsa::test {
namespace {

AttentionCase base_case() { return small_gqa_case(); }

template <class Call>
void expect_error(Call&& call, const std::string& argument, ErrorKind kind) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one about '" << argument << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find("'" + argument + "'"), std::string::npos) << e.what();
    EXPECT_FALSE(e.expected().empty());
    EXPECT_FALSE(e.got().empty());
  }
}

using ForwardEdit = std::function<void(ForwardParams&, AttentionProblem&)>;

// base_case() with q_variable_block_sizes.
AttentionCase q_padding_case() {
  AttentionCase c = base_case();
  c.q_padding = true;
  return c;
}

void expect_forward_rejects(const std::string& argument, const ForwardEdit& edit,
                            ErrorKind kind = ErrorKind::invalid_argument, const AttentionCase& c = base_case()) {
  SCOPED_TRACE("argument " + argument);
  AttentionProblem problem(c, next_seed());
  ForwardParams p = problem.forward_params();
  edit(p, problem);
  expect_error([&] { vsa::forward(p); }, argument, kind);
  EXPECT_TRUE(problem.out.untouched()) << "out written by a failed call";
  EXPECT_TRUE(problem.lse.untouched()) << "lse written by a failed call";
}

using BackwardEdit = std::function<void(BackwardParams&, AttentionProblem&)>;

void expect_backward_rejects(const std::string& argument, const BackwardEdit& edit,
                             ErrorKind kind = ErrorKind::invalid_argument, const AttentionCase& c = base_case()) {
  SCOPED_TRACE("argument " + argument);
  AttentionProblem problem(c, next_seed());
  BackwardParams p = problem.backward_params();
  edit(p, problem);
  expect_error([&] { vsa::backward(p); }, argument, kind);
  EXPECT_TRUE(problem.dq.untouched()) << "dq written by a failed call";
  EXPECT_TRUE(problem.dk.untouched()) << "dk written by a failed call";
  EXPECT_TRUE(problem.dv.untouched()) << "dv written by a failed call";
}

// Shrinking extents keeps every view inside its buffer, so a missing check
// shows up as a failed expectation rather than an out-of-bounds access.
TEST(ForwardRejects, WrongRank) {
  expect_forward_rejects("q", [](ForwardParams& p, AttentionProblem&) { p.in.q.rank = 3; });
  expect_forward_rejects("q2k_num", [](ForwardParams& p, AttentionProblem&) { p.in.q2k_num.rank = 2; });
  expect_forward_rejects("variable_block_sizes",
                         [](ForwardParams& p, AttentionProblem&) { p.in.variable_block_sizes.rank = 2; });
}

// A rank past the descriptor's kMaxRank shape entries (found by the
// fuzzer: the error message read the shape array out of bounds).
TEST(ForwardRejects, RankOutsideTheDescriptor) {
  for (int rank : {5, 64, -1}) {
    expect_forward_rejects("q", [&](ForwardParams& p, AttentionProblem&) { p.in.q.rank = rank; });
    expect_forward_rejects("lse.shape", [&](ForwardParams& p, AttentionProblem&) { p.lse.rank = rank; });
    expect_forward_rejects("q2k_idx", [&](ForwardParams& p, AttentionProblem&) { p.in.q2k_idx.rank = rank; });
  }
}

// TensorRef::contiguous given more extents than the descriptor holds (a
// 5-d view passed by mistake): the descriptor keeps that rank, which every
// call refuses, and nothing else. Before, the extents past kMaxRank and
// their strides were written past shape and stride: a fifth one's stride
// turned a CPU tensor into a CUDA one, and more ran past the object (which
// the asan preset reports).
TEST(ForwardRejects, MoreExtentsThanTheDescriptorHolds) {
  float x = 0.0f;
  const TensorRef five = TensorRef::contiguous(&x, DType::f32, {1, 2, 3, 4, 5}, Device::cpu, 3);
  EXPECT_EQ(five.rank, 5);
  EXPECT_EQ(five.device, Device::cpu);
  EXPECT_EQ(five.device_index, 3);
  EXPECT_EQ(five.shape, (std::array<std::int64_t, kMaxRank>{1, 2, 3, 4}));
  const TensorRef eight = TensorRef::contiguous(&x, DType::i32, {1, 1, 1, 1, 1, 1, 1, 1}, Device::cuda, 1);
  EXPECT_EQ(eight.rank, 8);
  EXPECT_EQ(eight.dtype, DType::i32);
  EXPECT_EQ(eight.device, Device::cuda);
  EXPECT_EQ(eight.device_index, 1);
  expect_forward_rejects("q", [](ForwardParams& p, AttentionProblem&) {
    const TensorRef& q = p.in.q;
    p.in.q = TensorRef::contiguous(q.data, q.dtype, {q.shape[0], q.shape[1], q.shape[2], q.shape[3], 1});
  });
  expect_forward_rejects("out", [](ForwardParams& p, AttentionProblem&) {
    const TensorRef& out = p.out;
    p.out = TensorRef::contiguous(out.data, out.dtype, {out.shape[0], out.shape[1], out.shape[2], out.shape[3], 1});
  });
}

// Extents consistent with each other but describing more memory than a
// process has (found by the fuzzer: computing their element count
// overflowed int64).
TEST(ForwardRejects, ExtentsPastTheAddressSpace) {
  for (std::int64_t batch : {std::int64_t{1} << 61, std::int64_t{1} << 62}) {
    expect_forward_rejects("q.shape", [&](ForwardParams& p, AttentionProblem&) {
      for (TensorRef* t : {&p.in.q, &p.in.k, &p.in.v, &p.in.q2k_idx, &p.in.q2k_num, &p.out, &p.lse})
        t->shape[0] = batch;
    });
  }
  expect_forward_rejects("q2k_idx.shape", [](ForwardParams& p, AttentionProblem&) {
    p.in.q2k_idx.shape[3] = std::int64_t{1} << 60;  // max_kv
  });
  // The same extents given to TensorRef::contiguous: its strides overflowed
  // int64 (undefined behaviour, which the asan preset's UBSan stops at).
  expect_forward_rejects("q.shape", [](ForwardParams& p, AttentionProblem&) {
    const std::int64_t big = std::int64_t{1} << 40;
    p.in.q = TensorRef::contiguous(p.in.q.data, p.in.q.dtype, {big, big, big, p.in.q.shape[3]});
  });
}

TEST(ForwardRejects, MismatchedShapes) {
  expect_forward_rejects("v.shape", [](ForwardParams& p, AttentionProblem&) { p.in.v.shape[2] -= 64; });
  expect_forward_rejects("out.shape", [](ForwardParams& p, AttentionProblem&) { p.out.shape[1] -= 1; });
  expect_forward_rejects("lse.shape", [](ForwardParams& p, AttentionProblem&) { p.lse.shape[2] -= 1; });
  expect_forward_rejects("q2k_num.shape",
                         [](ForwardParams& p, AttentionProblem&) { p.in.q2k_num.shape[2] -= 1; });
  expect_forward_rejects("q2k_idx.shape",
                         [](ForwardParams& p, AttentionProblem&) { p.in.q2k_idx.shape[0] -= 1; });
  expect_forward_rejects("k.shape", [](ForwardParams& p, AttentionProblem&) {  // batch
    p.in.k.shape[0] = 1;
    p.in.v.shape[0] = 1;
  });
  expect_forward_rejects("k.shape", [](ForwardParams& p, AttentionProblem&) {  // head dim 64 vs 128
    p.in.q.shape[3] = 128;
    p.in.q.shape[2] /= 2;
    p.out.shape[3] = 128;
    p.out.shape[2] /= 2;
  });
}

TEST(ForwardRejects, SequenceNotAMultipleOfTheBlock) {
  expect_forward_rejects("q.shape", [](ForwardParams& p, AttentionProblem&) {
    p.in.q.shape[2] -= 1;
    p.out.shape[2] -= 1;
  });
  expect_forward_rejects("variable_block_sizes.shape", [](ForwardParams& p, AttentionProblem&) {
    p.in.k.shape[2] -= 1;
    p.in.v.shape[2] -= 1;
  });
}

TEST(ForwardRejects, NumKvBlocksInconsistentWithVbsLength) {
  // Skv = 256: 3 entries do not divide it; 2 entries mean blk 128, and the
  // lists (made for 4 query blocks of 64) no longer match.
  expect_forward_rejects("variable_block_sizes.shape",
                         [](ForwardParams& p, AttentionProblem&) { p.in.variable_block_sizes.shape[0] = 3; });
  expect_forward_rejects("q2k_idx.shape",
                         [](ForwardParams& p, AttentionProblem&) { p.in.variable_block_sizes.shape[0] = 2; });
}

TEST(ForwardRejects, UnsupportedDtypeHeadDimAndBlock) {
  expect_forward_rejects(
      "q.dtype", [](ForwardParams& p, AttentionProblem&) { p.in.q.dtype = DType::i32; },
      ErrorKind::unsupported);
  expect_forward_rejects(
      "q.shape",
      [](ForwardParams& p, AttentionProblem&) {
        for (TensorRef* t : {&p.in.q, &p.in.k, &p.in.v, &p.out}) t->shape[3] = 32;
      },
      ErrorKind::unsupported);
  expect_forward_rejects(
      "variable_block_sizes.shape",
      [](ForwardParams& p, AttentionProblem&) {
        p.in.variable_block_sizes.shape[0] = 8;  // Skv / NK = 32
      },
      ErrorKind::unsupported);
}

TEST(ForwardRejects, MaxKvBelowOne) {
  expect_forward_rejects("q2k_idx.shape",
                         [](ForwardParams& p, AttentionProblem&) { p.in.q2k_idx.shape[3] = 0; });
}

TEST(ForwardRejects, CountsOutOfRange) {
  expect_forward_rejects("q2k_num", [](ForwardParams&, AttentionProblem& pr) { pr.q2k_num.set_int(5, 4); });
  expect_forward_rejects("q2k_num", [](ForwardParams&, AttentionProblem& pr) { pr.q2k_num.set_int(7, -1); });
}

TEST(ForwardRejects, VbsOutOfRange) {
  expect_forward_rejects("variable_block_sizes",
                         [](ForwardParams&, AttentionProblem& pr) { pr.set_vbs(2, 65); });
  expect_forward_rejects("variable_block_sizes",
                         [](ForwardParams&, AttentionProblem& pr) { pr.set_vbs(0, -1); });
}

TEST(ForwardRejects, IndicesOutOfRangeBeforeTheCount) {
  expect_forward_rejects("q2k_idx", [](ForwardParams&, AttentionProblem& pr) {
    pr.set_list(1, 3, 2, {0, 4});
  });
  expect_forward_rejects("q2k_idx", [](ForwardParams&, AttentionProblem& pr) { pr.set_list(0, 1, 0, {-1}); });
}

TEST(ForwardRejects, NullPointers) {
  const ForwardEdit edits[] = {
      [](ForwardParams& p, AttentionProblem&) { p.in.q.data = nullptr; },
      [](ForwardParams& p, AttentionProblem&) { p.in.k.data = nullptr; },
      [](ForwardParams& p, AttentionProblem&) { p.in.v.data = nullptr; },
      [](ForwardParams& p, AttentionProblem&) { p.in.q2k_idx.data = nullptr; },
      [](ForwardParams& p, AttentionProblem&) { p.in.q2k_num.data = nullptr; },
      [](ForwardParams& p, AttentionProblem&) { p.in.variable_block_sizes.data = nullptr; },
      [](ForwardParams& p, AttentionProblem&) { p.out.data = nullptr; },
      [](ForwardParams& p, AttentionProblem&) { p.lse.data = nullptr; },
  };
  const char* names[] = {"q", "k", "v", "q2k_idx", "q2k_num", "variable_block_sizes", "out", "lse"};
  for (std::size_t n = 0; n < std::size(edits); ++n) expect_forward_rejects(names[n], edits[n]);
}

// A tensor with no elements comes with a null pointer through DLPack (torch):
// the error names its extents, not a missing pointer.
TEST(ForwardRejects, EmptyTensorsByTheirShape) {
  expect_forward_rejects("q.shape", [](ForwardParams& p, AttentionProblem&) {
    p.in.q.shape[0] = 0;
    p.in.q.data = nullptr;
  });
  expect_forward_rejects("q2k_idx.shape", [](ForwardParams& p, AttentionProblem&) {
    p.in.q2k_idx.shape[3] = 0;
    p.in.q2k_idx.data = nullptr;
  });
  // With a pointer (numpy's empty arrays), an empty q's strides are not judged: its extents are.
  expect_forward_rejects("q.shape", [](ForwardParams& p, AttentionProblem&) {
    for (TensorRef* t : {&p.in.q, &p.in.k, &p.in.v, &p.out}) t->shape[0] = 0;
    p.in.q.stride[3] = 0;
  });
}

TEST(ForwardRejects, NonUnitHeadDimStride) {
  expect_forward_rejects("q.stride", [](ForwardParams& p, AttentionProblem&) {
    p.in.q.stride[3] = 2;
    p.in.q.shape[2] /= 2;  // keep the view inside its buffer
  });
  expect_forward_rejects("out.stride", [](ForwardParams& p, AttentionProblem&) { p.out.stride[3] = 2; });
}

// A written tensor whose rows certainly overlap: its rows would be written by racing threads.
// Each view stays inside its buffer (smaller strides reach less).
TEST(ForwardRejects, WrittenRowsThatOverlap) {
  expect_forward_rejects("out.stride", [](ForwardParams& p, AttentionProblem&) { p.out.stride[2] = 0; });
  expect_forward_rejects("out.stride", [](ForwardParams& p, AttentionProblem&) { p.out.stride[2] /= 2; });
  expect_forward_rejects("out.stride", [](ForwardParams& p, AttentionProblem&) { p.out.stride[1] = p.out.stride[2]; });
}

TEST(ForwardRejects, NonContiguousMetadata) {
  // One id per row while the rows stay max_kv = 3 apart.
  expect_forward_rejects("q2k_idx.stride",
                         [](ForwardParams& p, AttentionProblem&) { p.in.q2k_idx.shape[3] = 1; });
}

TEST(ForwardRejects, DtypeMismatches) {
  expect_forward_rejects("v.dtype", [](ForwardParams& p, AttentionProblem&) { p.in.v.dtype = DType::bf16; });
  expect_forward_rejects("k.dtype", [](ForwardParams& p, AttentionProblem&) { p.in.k.dtype = DType::f16; });
  expect_forward_rejects("out.dtype", [](ForwardParams& p, AttentionProblem&) { p.out.dtype = DType::bf16; });
  expect_forward_rejects("lse.dtype", [](ForwardParams& p, AttentionProblem&) { p.lse.dtype = DType::bf16; });
  expect_forward_rejects("q2k_idx.dtype",
                         [](ForwardParams& p, AttentionProblem&) { p.in.q2k_idx.dtype = DType::f32; });
  expect_forward_rejects("variable_block_sizes.dtype", [](ForwardParams& p, AttentionProblem&) {
    p.in.variable_block_sizes.dtype = DType::boolean;
  });
}

TEST(ForwardRejects, HeadsNotAMultipleOfKvHeads) {
  expect_forward_rejects("k.shape", [](ForwardParams& p, AttentionProblem&) {
    p.in.q.shape[1] = 3;
    p.out.shape[1] = 3;
  });
}

TEST(ForwardRejects, DeviceMismatch) {
  expect_forward_rejects("k.device",
                         [](ForwardParams& p, AttentionProblem&) { p.in.k.device = Device::cuda; });
  expect_forward_rejects("out.device",
                         [](ForwardParams& p, AttentionProblem&) { p.out.device = Device::cuda; });
  expect_forward_rejects("q2k_num.device",
                         [](ForwardParams& p, AttentionProblem&) { p.in.q2k_num.device_index = 1; });
}

TEST(ForwardRejects, BadLayoutAndScale) {
  expect_forward_rejects("layout",
                         [](ForwardParams& p, AttentionProblem&) { p.in.layout = static_cast<Layout>(7); });
  expect_forward_rejects("scale", [](ForwardParams& p, AttentionProblem&) { p.in.scale = NAN; });
  // Finite, but inf once in base 2 (scale · log2 e): every row with a key came out NaN.
  expect_forward_rejects("scale", [](ForwardParams& p, AttentionProblem&) { p.in.scale = 3e38f; });
}

TEST(ForwardRejects, BadQueryBlockSizes) {
  const auto invalid = ErrorKind::invalid_argument;
  const AttentionCase c = q_padding_case();
  using P = ForwardParams;
  using A = AttentionProblem;
  expect_forward_rejects("q_variable_block_sizes", [](P& p, A&) { p.in.q_variable_block_sizes.rank = 2; }, invalid, c);
  expect_forward_rejects(  // one entry per query block: NQ = 4
      "q_variable_block_sizes.shape", [](P& p, A&) { p.in.q_variable_block_sizes.shape[0] = 3; }, invalid, c);
  expect_forward_rejects(
      "q_variable_block_sizes.dtype", [](P& p, A&) { p.in.q_variable_block_sizes.dtype = DType::f32; }, invalid, c);
  expect_forward_rejects(
      "q_variable_block_sizes.device", [](P& p, A&) { p.in.q_variable_block_sizes.device = Device::cuda; }, invalid,
      c);
  expect_forward_rejects(
      "q_variable_block_sizes.stride",
      [](P& p, A&) {  // every third entry of q2k_idx (max_kv = 3): NQ entries, strided
        p.in.q_variable_block_sizes = p.in.q2k_idx;
        p.in.q_variable_block_sizes.rank = 1;
        p.in.q_variable_block_sizes.shape[0] = 4;
        p.in.q_variable_block_sizes.stride[0] = 3;
      },
      invalid, c);
  expect_forward_rejects("q_variable_block_sizes", [](P&, A& pr) { pr.set_q_vbs(1, 65); }, invalid, c);
  expect_forward_rejects("q_variable_block_sizes", [](P&, A& pr) { pr.set_q_vbs(3, -1); }, invalid, c);
}

// OpenBLAS's interface takes sizes and leading dimensions as int: S = Q·Kᵀ has one column per listed
// valid key, so a query block may list at most 2^31 - 1 of them on the CPU (duplicates count). One list
// of 2^24 + 1 full 128-token blocks (block 0 every time: a 64 MiB int32 list) names 2^31 + 128 keys;
// it is refused before any scratch for them is allocated or an output written.
AttentionCase one_block_case() {
  AttentionCase c;
  c.heads = c.kv_heads = 1;
  c.num_q_blocks = c.num_kv_blocks = 1;
  c.block = 128;
  c.max_kv = 1;
  return c;
}

struct KeysPastTheBlasRange {
  HostTensor idx{DType::i32, {1, 1, 1, (std::int64_t{1} << 24) + 1}};  // zeros: block 0 each time
  HostTensor num{DType::i32, {1, 1, 1}};

  KeysPastTheBlasRange() { num.set_int(0, idx.shape()[3]); }
  void apply(AttentionInputs& in, AttentionProblem& problem) const {
    problem.set_vbs(0, 128);
    in.q2k_idx = idx.ref();
    in.q2k_num = num.ref();
  }
};

TEST(ForwardRejects, ListedKeysPastTheBlasRangeOnTheCpu) {
  const KeysPastTheBlasRange lists;
  expect_forward_rejects(
      "q2k_idx", [&](ForwardParams& p, AttentionProblem& pr) { lists.apply(p.in, pr); }, ErrorKind::unsupported,
      one_block_case());
}

TEST(BackwardRejects, ListedKeysPastTheBlasRangeOnTheCpu) {
  const KeysPastTheBlasRange lists;
  expect_backward_rejects(
      "q2k_idx", [&](BackwardParams& p, AttentionProblem& pr) { lists.apply(p.in, pr); }, ErrorKind::unsupported,
      one_block_case());
}

TEST(BackwardRejects, MissingOrMisshapenTensors) {
  expect_backward_rejects("dout", [](BackwardParams& p, AttentionProblem&) { p.dout.data = nullptr; });
  expect_backward_rejects("lse", [](BackwardParams& p, AttentionProblem&) { p.lse.data = nullptr; });
  expect_backward_rejects("dq.shape", [](BackwardParams& p, AttentionProblem&) { p.dq.shape[2] -= 64; });
  expect_backward_rejects("dk.shape", [](BackwardParams& p, AttentionProblem&) { p.dk.shape[1] = 1; });
  expect_backward_rejects("dv.dtype", [](BackwardParams& p, AttentionProblem&) { p.dv.dtype = DType::f16; });
  expect_backward_rejects("dv.stride", [](BackwardParams& p, AttentionProblem&) { p.dv.stride[3] = 2; });
  expect_backward_rejects("dq.stride", [](BackwardParams& p, AttentionProblem&) { p.dq.stride[2] = 0; });
  expect_backward_rejects("dk.stride", [](BackwardParams& p, AttentionProblem&) { p.dk.stride[1] = 0; });
  expect_backward_rejects("dv.stride", [](BackwardParams& p, AttentionProblem&) { p.dv.stride[0] = p.dv.stride[2]; });
  expect_backward_rejects("dq.device",
                          [](BackwardParams& p, AttentionProblem&) { p.dq.device = Device::cuda; });
  expect_backward_rejects("q", [](BackwardParams& p, AttentionProblem&) { p.in.q.rank = 2; });
}

TEST(BackwardRejects, BadMetadataValues) {
  expect_backward_rejects("q2k_num", [](BackwardParams&, AttentionProblem& pr) { pr.q2k_num.set_int(0, 9); });
  expect_backward_rejects("q2k_idx", [](BackwardParams&, AttentionProblem& pr) {
    pr.set_list(1, 0, 3, {2, 17});
  });
  expect_backward_rejects("variable_block_sizes",
                          [](BackwardParams&, AttentionProblem& pr) { pr.set_vbs(3, 100); });
  expect_backward_rejects(
      "q_variable_block_sizes", [](BackwardParams&, AttentionProblem& pr) { pr.set_q_vbs(0, 100); },
      ErrorKind::invalid_argument, q_padding_case());
  expect_backward_rejects(
      "q_variable_block_sizes.shape",
      [](BackwardParams& p, AttentionProblem&) { p.in.q_variable_block_sizes.shape[0] = 5; },
      ErrorKind::invalid_argument, q_padding_case());
}

// A tensor the call writes over another tensor of the call: refused, naming both, with nothing
// read or written. Unrefused, each gave a silently wrong result: fine = out left fine holding the
// combined result; the backward's key pass re-read q and dout after dq was written over them;
// dk = dv held one of the two.
TEST(ForwardRejects, WrittenTensorsSharingMemory) {
  AttentionProblem pr(base_case(), next_seed());
  std::mt19937_64 rng(next_seed());
  CombineAddend addend = draw_combine_addend(pr, rng, AddendKind::gated_keeping_fine);
  addend.fine.poison();
  const std::vector<const HostTensor*> all = {&pr.q, &pr.k, &pr.v, &pr.out, &pr.lse, &addend.coarse,
                                              &addend.gate, &addend.fine};
  const auto refused = [&](const std::string& argument, const std::string& other, const ForwardEdit& edit) {
    ForwardParams p = pr.forward_params();
    p.coarse = addend.coarse.ref();
    p.gate = addend.gate_ref();
    p.fine = addend.fine_ref();
    edit(p, pr);
    expect_refused_as_shared(argument, other, all, [&] { vsa::forward(p); });
  };
  refused("out", "q", [](ForwardParams& p, AttentionProblem&) { p.out = p.in.q; });
  refused("out", "fine", [](ForwardParams& p, AttentionProblem&) { p.fine = p.out; });
  refused("out", "gate", [](ForwardParams& p, AttentionProblem&) { p.out = p.gate; });
  // [B, H, Sq] and [B, H, NQ, D] floats (D = blk): the same bytes.
  refused("lse", "coarse", [](ForwardParams& p, AttentionProblem&) { p.lse.data = p.coarse.data; });
}

TEST(BackwardRejects, WrittenTensorsSharingMemory) {
  AttentionProblem pr(base_case(), next_seed());
  const BackwardParams base = pr.backward_params();
  for (HostTensor* t : {&pr.dq, &pr.dk, &pr.dv}) t->poison();
  const std::vector<const HostTensor*> all = {&pr.q, &pr.k, &pr.v, &pr.out, &pr.lse, &pr.dout, &pr.dq, &pr.dk, &pr.dv};
  const auto refused = [&](const std::string& argument, const std::string& other, const BackwardEdit& edit) {
    BackwardParams p = base;
    edit(p, pr);
    expect_refused_as_shared(argument, other, all, [&] { vsa::backward(p); });
  };
  refused("dq", "q", [](BackwardParams& p, AttentionProblem&) { p.dq = p.in.q; });
  refused("dq", "dout", [](BackwardParams& p, AttentionProblem&) { p.dq = p.dout; });
  refused("dq", "out", [](BackwardParams& p, AttentionProblem&) { p.dq = p.out; });
  refused("dk", "dv", [](BackwardParams& p, AttentionProblem&) { p.dk = p.dv; });
  refused("dv", "v", [](BackwardParams& p, AttentionProblem&) { p.dv = p.in.v; });
}

}  // namespace
}  // namespace vsa::test
