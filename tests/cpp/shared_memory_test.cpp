// Which tensors share memory (detail::expect_unshared, on descriptors of
// made-up addresses), and that tensors which only interleave do not: q, k and
// v read from one packed qkv buffer, and dq, dk and dv written into one packed
// buffer, are accepted and give the reference's results. (Each entry point's
// refusal of tensors that do share memory is tested with its other bad
// arguments.)
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attention_cases.hpp"
#include "core/check.hpp"

namespace vsa::test {
namespace {

// GQA 4 -> 2, Sq = Skv (one sequence axis for the packed buffer), 4 blocks of 64, D = 64.
AttentionCase packed_case(DType dtype = DType::f32, Layout layout = Layout::bhsd) {
  AttentionCase c = small_gqa_case(dtype, layout);
  c.name = std::string(dtype_name(dtype)) + (layout == Layout::bhsd ? "_bhsd" : "_bshd");
  return c;
}

// Three sequence tensors side by side in one [B, S, Ha + Hb + Hc, D] buffer
// (poisoned), as a fused qkv projection writes q, k and v, or as a caller
// wants dq, dk and dv for its backward: each part a strided view in the
// case's layout whose rows interleave with the other parts' without touching
// them, so their address ranges overlap.
class PackedParts {
 public:
  PackedParts(const AttentionCase& c, std::vector<std::int64_t> heads)
      : case_(c), heads_(std::move(heads)),
        buffer_(c.dtype, {c.batch, c.seq_q(), heads_[0] + heads_[1] + heads_[2], c.head_dim}) {
    buffer_.poison();
  }

  TensorRef part(int i) const {
    const AttentionCase& c = case_;
    std::int64_t first_head = 0;
    for (int j = 0; j < i; ++j) first_head += heads_[j];
    const std::int64_t token = (heads_[0] + heads_[1] + heads_[2]) * c.head_dim, batch = c.seq_q() * token;
    TensorRef t = buffer_.ref();
    t.data = static_cast<unsigned char*>(t.data) + first_head * c.head_dim * static_cast<std::int64_t>(dtype_size(c.dtype));
    const std::int64_t h = heads_[i];
    if (c.layout == Layout::bhsd) {
      t.shape = {c.batch, h, c.seq_q(), c.head_dim};
      t.stride = {batch, c.head_dim, token, 1};
    } else {
      t.shape = {c.batch, c.seq_q(), h, c.head_dim};
      t.stride = {batch, token, c.head_dim, 1};
    }
    return t;
  }

  // Copies between part i and a host tensor of its logical shape (element by element, row-major).
  void load(int i, const HostTensor& from) {
    visit(i, from, [&](void* e, std::int64_t flat) { encode_float(case_.dtype, from.get(flat), e); });
  }
  void store(int i, HostTensor& to) const {
    visit(i, to, [&](const void* e, std::int64_t flat) { to.set(flat, decode_float(case_.dtype, e)); });
  }

  const HostTensor& buffer() const { return buffer_; }

 private:
  template <class Visit>
  void visit(int i, const HostTensor& like, Visit&& f) const {
    const TensorRef t = part(i);
    const std::vector<std::int64_t>& s = like.shape();
    const auto size = static_cast<std::int64_t>(dtype_size(t.dtype));
    std::int64_t flat = 0;
    for (std::int64_t a = 0; a < s[0]; ++a)
      for (std::int64_t b = 0; b < s[1]; ++b)
        for (std::int64_t c = 0; c < s[2]; ++c)
          for (std::int64_t d = 0; d < s[3]; ++d, ++flat)
            f(static_cast<unsigned char*>(t.data) +
                  (a * t.stride[0] + b * t.stride[1] + c * t.stride[2] + d * t.stride[3]) * size,
              flat);
  }

  AttentionCase case_;
  std::vector<std::int64_t> heads_;
  HostTensor buffer_;
};

// The problem's q, k and v copied into one packed buffer.
PackedParts packed_qkv(const AttentionProblem& pr) {
  const AttentionCase& c = pr.spec();
  PackedParts qkv(c, {c.heads, c.kv_heads, c.kv_heads});
  qkv.load(0, pr.q);
  qkv.load(1, pr.k);
  qkv.load(2, pr.v);
  return qkv;
}

// A call's q, k and v read from the packed buffer's parts.
void read_packed(AttentionInputs& in, const PackedParts& qkv) {
  in.q = qkv.part(0);
  in.k = qkv.part(1);
  in.v = qkv.part(2);
}

class PackedSequenceTensors : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(PackedSequenceTensors, ForwardReadsQkvFromOneBuffer) {
  AttentionProblem pr(GetParam(), next_seed());
  const PackedParts qkv = packed_qkv(pr);
  ForwardParams p = pr.forward_params();
  read_packed(p.in, qkv);
  vsa::forward(p);
  EXPECT_TRUE(pr.out.written_exactly_view());
  pr.expect_forward_matches();
}

TEST_P(PackedSequenceTensors, BackwardReadsQkvFromOneBufferAndWritesDqkvIntoAnother) {
  AttentionProblem pr(GetParam(), next_seed());
  const AttentionCase& c = pr.spec();
  const PackedParts qkv = packed_qkv(pr);
  PackedParts dqkv(c, {c.heads, c.kv_heads, c.kv_heads});
  BackwardParams p = pr.backward_params();
  read_packed(p.in, qkv);
  p.dq = dqkv.part(0);
  p.dk = dqkv.part(1);
  p.dv = dqkv.part(2);
  vsa::backward(p);
  EXPECT_TRUE(dqkv.buffer().written_exactly_view()) << "an element of dq, dk or dv not written";
  dqkv.store(0, pr.dq);
  dqkv.store(1, pr.dk);
  dqkv.store(2, pr.dv);
  pr.expect_backward_matches();
}

INSTANTIATE_TEST_SUITE_P(Cases, PackedSequenceTensors,
                         ::testing::Values(packed_case(DType::f32, Layout::bhsd), packed_case(DType::f32, Layout::bshd),
                                           packed_case(DType::bf16, Layout::bhsd), packed_case(DType::bf16, Layout::bshd)),
                         case_name);

// ---- the decision -----------------------------------------------------------------------------------

// A bf16 view at a made-up address (no call here reads it).
TensorRef at(std::uintptr_t address, std::array<std::int64_t, 4> shape, std::array<std::int64_t, 4> stride,
             Device device = Device::cpu) {
  TensorRef t;
  t.data = reinterpret_cast<void*>(address);
  t.dtype = DType::bf16;
  t.rank = 4;
  t.shape = shape;
  t.stride = stride;
  t.device = device;
  return t;
}

// "" when `written` and `read` are accepted together, else the error's `got`.
std::string sharing(const TensorRef& written, const TensorRef& read) {
  try {
    detail::expect_unshared({{written, "w"}}, {{read, "r"}});
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "w");
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    return e.got();
  }
}

constexpr std::uintptr_t kBase = 0x10000;
constexpr std::int64_t B = 2, S = 8, H = 3, D = 4;

// Part j of a [B, S, 3, H, D] bf16 buffer as [B, S, H, D] (bshd) or [B, H, S, D] (bhsd).
TensorRef qkv_part(int j, Layout layout) {
  const std::uintptr_t address = kBase + static_cast<std::uintptr_t>(j * H * D * 2);
  if (layout == Layout::bshd) return at(address, {B, S, H, D}, {S * 3 * H * D, 3 * H * D, D, 1});
  return at(address, {B, H, S, D}, {S * 3 * H * D, D, 3 * H * D, 1});
}

TEST(SharedMemory, InterleavedPartsOfOneBufferAreApart) {
  for (const Layout layout : {Layout::bhsd, Layout::bshd})
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        if (i == j) continue;
        EXPECT_EQ(sharing(qkv_part(i, layout), qkv_part(j, Layout::bshd)), "") << i << " " << j;
      }
  // [B, S, H, 3, D]: the parts interleave head by head.
  const auto per_head = [](int j) {
    return at(kBase + static_cast<std::uintptr_t>(j * D * 2), {B, S, H, D}, {S * H * 3 * D, H * 3 * D, 3 * D, 1});
  };
  EXPECT_EQ(sharing(per_head(0), per_head(2)), "");
  // Part 1 with its sequence reversed (a negative stride from its last token) against part 0.
  TensorRef reversed = qkv_part(1, Layout::bshd);
  reversed.data = static_cast<char*>(reversed.data) + (S - 1) * 3 * H * D * 2;
  reversed.stride[1] = -reversed.stride[1];
  EXPECT_EQ(sharing(reversed, qkv_part(0, Layout::bshd)), "");
  // A broadcast read (stride 0 over the batch) of part 2.
  TensorRef broadcast = qkv_part(2, Layout::bshd);
  broadcast.stride[0] = 0;
  EXPECT_EQ(sharing(qkv_part(0, Layout::bshd), broadcast), "");
}

TEST(SharedMemory, OverlappingViewsAreRefused) {
  const TensorRef q = qkv_part(0, Layout::bshd);
  EXPECT_EQ(sharing(q, q), "shares memory with r");
  EXPECT_EQ(sharing(q, qkv_part(0, Layout::bhsd)), "shares memory with r");  // one memory, another view
  // Part 0 moved by one element into part 1: the elements truly meet.
  TensorRef shifted = qkv_part(0, Layout::bshd);
  shifted.data = static_cast<char*>(shifted.data) + 2;
  EXPECT_EQ(sharing(shifted, qkv_part(1, Layout::bshd)),
            "may share memory (interleaved address ranges not shown disjoint) with r");
  // Two dense tensors whose ranges meet by one element.
  const TensorRef dense = at(kBase, {1, 1, 4, D}, {4 * D, 4 * D, D, 1});
  EXPECT_EQ(sharing(dense, at(kBase + 15 * 2, {1, 1, 1, D}, {D, D, D, 1})), "shares memory with r");
  EXPECT_EQ(sharing(dense, at(kBase + 16 * 2, {1, 1, 1, D}, {D, D, D, 1})), "");
}

TEST(SharedMemory, EmptyUndefinedAndOtherDeviceTensorsShareNothing) {
  const TensorRef q = qkv_part(0, Layout::bshd);
  EXPECT_EQ(sharing(q, TensorRef{}), "");
  EXPECT_EQ(sharing(q, at(kBase, {B, 0, H, D}, {0, 0, 0, 0})), "");
  EXPECT_EQ(sharing(q, at(kBase, {B, S, H, D}, q.stride, Device::cuda)), "");
  TensorRef other_gpu = at(kBase, {B, S, H, D}, q.stride, Device::cuda);
  other_gpu.device_index = 1;
  EXPECT_NE(sharing(at(kBase, {B, S, H, D}, q.stride, Device::cuda), at(kBase, {B, S, H, D}, q.stride, Device::cuda)), "");
  EXPECT_EQ(sharing(at(kBase, {B, S, H, D}, q.stride, Device::cuda), other_gpu), "");
}

// The CUDA backward writes its workspace: one over dq is refused before any device is asked
// (descriptors of host buffers marked as CUDA ones; nothing reads them).
TEST(SharedMemory, BackwardWorkspaceOverAnOutputIsRefused) {
  AttentionProblem pr(packed_case(), next_seed());
  BackwardParams p = pr.backward_params();
  for (TensorRef* t : {&p.in.q, &p.in.k, &p.in.v, &p.in.q2k_idx, &p.in.q2k_num, &p.in.variable_block_sizes, &p.out,
                       &p.lse, &p.dout, &p.dq, &p.dk, &p.dv})
    t->device = Device::cuda;
  p.workspace = p.dq.data;
  p.workspace_bytes = 256;
  try {
    vsa::backward(p);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "dq") << e.what();
    EXPECT_EQ(e.got(), "shares memory with workspace") << e.what();
  }
}

}  // namespace
}  // namespace vsa::test
