#include "attention_cases.hpp"

namespace vsa::test {

AttentionCase small_gqa_case(DType dtype, Layout layout) {
  AttentionCase c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.num_q_blocks = 4;
  c.num_kv_blocks = 4;
  c.max_kv = 3;
  c.dtype = dtype;
  c.layout = layout;
  return c;
}

AttentionCase query_padding_case(DType dtype, Layout layout) {
  AttentionCase c;
  c.dtype = dtype;
  c.layout = layout;
  c.q_padding = true;
  c.num_q_blocks = 7;
  c.heads = 4;
  c.kv_heads = 2;
  c.max_kv = 4;
  return c;
}

std::vector<AttentionCase> attention_cases() {
  std::vector<AttentionCase> cases;
  auto add = [&](const char* name, auto&& edit) {
    AttentionCase c;
    c.name = name;
    edit(c);
    cases.push_back(c);
  };
  add("f32_bhsd", [](AttentionCase&) {});
  add("f32_bshd_d128", [](AttentionCase& c) {
    c.layout = Layout::bshd;
    c.head_dim = 128;
  });
  add("f32_blk128", [](AttentionCase& c) {
    c.block = 128;
    c.num_q_blocks = 2;
    c.num_kv_blocks = 4;
  });
  add("bf16_bhsd", [](AttentionCase& c) { c.dtype = DType::bf16; });
  add("f16_bshd", [](AttentionCase& c) {
    c.dtype = DType::f16;
    c.layout = Layout::bshd;
  });
  add("bf16_d128_blk128", [](AttentionCase& c) {
    c.dtype = DType::bf16;
    c.head_dim = 128;
    c.block = 128;
    c.num_q_blocks = 2;
  });
  add("f16_d128_bhsd", [](AttentionCase& c) {
    c.dtype = DType::f16;
    c.head_dim = 128;
  });
  add("gqa_4_to_2", [](AttentionCase& c) {
    c.heads = 4;
    c.kv_heads = 2;
  });
  add("gqa_3_to_1_bf16_bshd", [](AttentionCase& c) {
    c.heads = 3;
    c.kv_heads = 1;
    c.dtype = DType::bf16;
    c.layout = Layout::bshd;
  });
  add("batch2", [](AttentionCase& c) { c.batch = 2; });
  add("cross_more_q_blocks", [](AttentionCase& c) {  // odd NQ, NQ != NK
    c.num_q_blocks = 5;
    c.num_kv_blocks = 2;
    c.max_kv = 2;
  });
  add("cross_more_kv_blocks", [](AttentionCase& c) {
    c.num_q_blocks = 1;
    c.num_kv_blocks = 7;
    c.max_kv = 5;
  });
  add("int64_metadata", [](AttentionCase& c) {
    c.idx_dtype = DType::i64;
    c.num_dtype = DType::i64;
    c.vbs_dtype = DType::i64;
  });
  add("mixed_int_metadata", [](AttentionCase& c) {
    c.idx_dtype = DType::i64;
    c.vbs_dtype = DType::i64;
  });
  add("duplicates", [](AttentionCase& c) {
    c.duplicates = true;
    c.max_kv = 6;
  });
  add("bshd_padded_view_f32", [](AttentionCase& c) {
    c.layout = Layout::bshd;
    c.padded_rows = true;
  });
  add("bshd_padded_view_bf16_gqa", [](AttentionCase& c) {
    c.layout = Layout::bshd;
    c.padded_rows = true;
    c.dtype = DType::bf16;
    c.heads = 4;
    c.kv_heads = 2;
  });
  add("bhsd_padded_view", [](AttentionCase& c) { c.padded_rows = true; });
  add("custom_scale", [](AttentionCase& c) { c.scale = 0.31f; });
  add("wide_lists", [](AttentionCase& c) {  // capacity larger than NK: counts up to NK
    c.max_kv = 9;
    c.batch = 2;
  });
  // q_variable_block_sizes: seven query blocks take the seven cuts of a
  // 64-row block (query_row_cuts) in turn, from a random one on.
  add("q_padding", [](AttentionCase& c) {
    c.q_padding = true;
    c.num_q_blocks = 7;
    c.max_kv = 4;
  });
  add("q_padding_bf16_bshd_gqa_d128", [](AttentionCase& c) {
    c.q_padding = true;
    c.num_q_blocks = 7;
    c.dtype = DType::bf16;
    c.layout = Layout::bshd;
    c.head_dim = 128;
    c.heads = 4;
    c.kv_heads = 2;
  });
  add("q_padding_blk128_int64", [](AttentionCase& c) {
    c.q_padding = true;
    c.block = 128;
    c.num_q_blocks = 8;
    c.num_kv_blocks = 3;
    c.q_vbs_dtype = DType::i64;
    c.idx_dtype = DType::i64;
    c.num_dtype = DType::i64;
    c.vbs_dtype = DType::i64;
  });
  add("q_padding_f16_padded_view_batch2", [](AttentionCase& c) {
    c.q_padding = true;
    c.num_q_blocks = 7;
    c.dtype = DType::f16;
    c.padded_rows = true;
    c.batch = 2;
    c.duplicates = true;
  });
  return cases;
}

AttentionCase partial_blocks_case(int head_dim, int block, const std::vector<std::int64_t>& cuts) {
  AttentionCase c;
  c.dtype = DType::bf16;
  c.head_dim = head_dim;
  c.block = block;
  c.num_q_blocks = 2;
  c.num_kv_blocks = static_cast<std::int64_t>(cuts.size());
  c.max_kv = c.num_kv_blocks;
  return c;
}

void list_every_block(AttentionProblem& problem, const AttentionCase& c, const std::vector<std::int64_t>& cuts) {
  std::vector<std::int64_t> every_block;
  for (std::int64_t j = 0; j < c.num_kv_blocks; ++j) {
    problem.set_vbs(j, cuts[static_cast<std::size_t>(j)]);
    every_block.push_back(j);
  }
  for (std::int64_t h = 0; h < c.heads; ++h)
    for (std::int64_t i = 0; i < c.num_q_blocks; ++i) problem.set_list(0, h, i, every_block);
}

}  // namespace vsa::test
