// CPU backward pass, flash-attention style with the base-2 LSE of the forward:
//   p = exp2(s * scale * log2e - lse), delta_r = dout_r . out_r,
//   ds = p * (dp - delta), dq = scale * sum ds k, dk = scale * sum ds q,
//   dv = sum p dout.
// One GQA group (batch, kv head) at a time, its query blocks in chunks whose
// P and dS fit a memory budget. Per chunk, two race-free passes: per query
// block, P and dS (stored) and dq (rows own their dq); per kv block, dk and
// dv accumulated from the stored tiles of every query block that lists it, so
// each kv row has one writer and nothing is computed twice. Every sum runs in
// a fixed order (chunks, then query blocks, then list entries), whatever the
// thread count. Every product is a single-threaded matmul on the item's
// thread. Padding query rows (q_variable_block_sizes) enter no product: their
// dq rows are written as zeros, and they add nothing to dk or dv.
#include <algorithm>
#include <span>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/matmul.hpp"
#include "cpu/parallel_for.hpp"
#include "cpu/selected_keys.hpp"
#include "cpu/softmax_math.hpp"

namespace vsa::cpu {
namespace {

// Where a query block's P and dS live in the chunk's storage: [rows, count]
// matrices (rows = its real query rows, count = the valid keys its list
// names) at `offset`.
struct StoredScores {
  std::int64_t offset = 0, rows = 0, count = 0;
};

// One listed kv block's columns inside a query block's stored matrices.
struct Tile {
  std::int64_t item;    // the query block (work item number, as query_block())
  std::int64_t column;  // first column of this kv block's valid keys
};

// For each kv block, its tiles in a chunk of query blocks: in query block
// order and list order, once per occurrence (counting sort). Derived from the
// validated q2k lists, never from p.k2q_*, whose contents were never checked.
class TileLists {
 public:
  TileLists(const AttentionInputs& in, const ProblemShape& s, std::int64_t first_item, std::int64_t last_item)
      : offsets_(static_cast<std::size_t>(s.num_kv_blocks + 1), 0) {
    auto each_entry = [&](auto&& visit) {
      for (std::int64_t item = first_item; item < last_item; ++item) {
        std::int64_t column = 0;
        for (std::int64_t e = 0; e < detail::load_int(in.q2k_num, item); ++e) {
          const std::int64_t block = detail::load_int(in.q2k_idx, item * s.max_kv + e);
          visit(block, Tile{item, column});
          column += detail::load_int(in.variable_block_sizes, block);
        }
      }
    };
    each_entry([&](std::int64_t block, Tile) { ++offsets_[block + 1]; });
    for (std::size_t n = 1; n < offsets_.size(); ++n) offsets_[n] += offsets_[n - 1];
    tiles_.resize(static_cast<std::size_t>(offsets_.back()));
    std::vector<std::int64_t> cursor(offsets_.begin(), offsets_.end() - 1);
    each_entry([&](std::int64_t block, Tile tile) { tiles_[cursor[block]++] = tile; });
  }

  std::span<const Tile> of(std::int64_t kv_block) const {
    return {tiles_.data() + offsets_[kv_block], static_cast<std::size_t>(offsets_[kv_block + 1] - offsets_[kv_block])};
  }

 private:
  std::vector<std::int64_t> offsets_;
  std::vector<Tile> tiles_;
};

template <class T>
class BackwardPass {
 public:
  BackwardPass(const BackwardParams& p, const ProblemShape& s, float scale, std::int64_t store_floats)
      : p_(p),
        s_(s),
        scale_(scale),
        scale_log2_(scale * kLog2e),
        d_(s.head_dim),
        rows_(s.block),
        q_(sequence_rows<const T>(p.in.q, p.in.layout)),
        k_(sequence_rows<const T>(p.in.k, p.in.layout)),
        v_(sequence_rows<const T>(p.in.v, p.in.layout)),
        out_(sequence_rows<const T>(p.out, p.in.layout)),
        dout_(sequence_rows<const T>(p.dout, p.in.layout)),
        lse_(static_cast<const float*>(p.lse.data)),
        store_floats_(store_floats) {}

  void run() {
    Scratch& caller = thread_scratch();
    const std::int64_t group = s_.heads / s_.kv_heads, kv_rows = s_.num_kv_blocks * rows_;
    std::vector<StoredScores> stored(static_cast<std::size_t>(group * s_.num_q_blocks));
    for (std::int64_t batch = 0; batch < s_.batch; ++batch) {
      for (std::int64_t kv_head = 0; kv_head < s_.kv_heads; ++kv_head) {
        // The group's query blocks are consecutive work items.
        const std::int64_t first_item = (batch * s_.heads + kv_head * group) * s_.num_q_blocks;
        const std::int64_t items = group * s_.num_q_blocks;
        float* grads = caller.call_grads.get(2 * kv_rows * d_);  // dk then dv, [Skv, D] each
        std::fill(grads, grads + 2 * kv_rows * d_, 0.0f);
        for (std::int64_t begin = 0; begin < items;) {
          // The chunk: query blocks [begin, end) whose P and dS fit the budget
          // (one query block over it runs alone).
          std::int64_t end = begin, floats = 0;
          while (end < items) {
            const std::int64_t count = listed_keys(first_item + end);
            const std::int64_t rows = real_query_rows(p_.in, s_, query_block(first_item + end, s_));
            if (end > begin && floats + 2 * rows * count > store_floats_) break;
            stored[end] = StoredScores{floats / 2, rows, count};
            floats += 2 * rows * count;
            ++end;
          }
          float* p_store = caller.call_scores.get(floats);
          float* ds_store = p_store + floats / 2;
          parallel_for(end - begin, [&](std::int64_t n) {
            compute_dq(first_item + begin + n, stored[begin + n], p_store, ds_store);
          });
          const TileLists tiles(p_.in, s_, first_item + begin, first_item + end);
          parallel_for(s_.num_kv_blocks, [&](std::int64_t kv_block) {
            accumulate_dk_dv(kv_block, tiles, stored.data(), first_item, p_store, ds_store, grads,
                             grads + kv_rows * d_);
          });
          begin = end;
        }
        parallel_for(s_.num_kv_blocks, [&](std::int64_t kv_block) {
          store_dk_dv(batch, kv_head, kv_block, grads, grads + kv_rows * d_);
        });
      }
    }
  }

 private:
  // Valid keys the list of work item `item` names.
  std::int64_t listed_keys(std::int64_t item) const {
    std::int64_t count = 0;
    for (std::int64_t e = 0; e < detail::load_int(p_.in.q2k_num, item); ++e)
      count += detail::load_int(p_.in.variable_block_sizes, detail::load_int(p_.in.q2k_idx, item * s_.max_kv + e));
    return count;
  }

  // One query block: delta, then P and dS = P ∘ (dP − delta) into the store
  // ([at.rows, count] each), then dq = scale · dS · K; the dq rows of padding
  // rows (at.rows on) are zero.
  void compute_dq(std::int64_t item, const StoredScores& at, float* p_store, float* ds_store) const {
    Scratch& scratch = thread_scratch();
    const QueryBlock qb = query_block(item, s_);
    const std::int64_t first = qb.index * rows_, real = at.rows;
    float* dq_block = scratch.result.get(rows_ * d_);
    std::fill(dq_block + real * d_, dq_block + rows_ * d_, 0.0f);
    const SelectedKeys sel = real > 0 ? gather_selected_keys(k_, v_, p_.in, s_, qb, scratch) : SelectedKeys{};
    if (sel.count == 0) {
      std::fill(dq_block, dq_block + real * d_, 0.0f);
    } else {
      const float* lse = lse_ + (qb.batch * s_.heads + qb.head) * s_.seq_q + first;
      const FloatRows dout = float_rows(dout_, qb.batch, qb.head, first, real, d_, scratch.douts);
      float* delta = scratch.row_stats.get(real);
      {  // out is needed for delta only; its scratch is the queries' next
        const FloatRows out = float_rows(out_, qb.batch, qb.head, first, real, d_, scratch.queries);
        for (std::int64_t r = 0; r < real; ++r) delta[r] = dot(out.data + r * out.ld, dout.data + r * dout.ld, d_);
      }
      const FloatRows q = float_rows(q_, qb.batch, qb.head, first, real, d_, scratch.queries);
      float* p = p_store + at.offset;
      float* ds = ds_store + at.offset;
      matmul(Transpose::no, Transpose::yes, real, sel.count, d_, scale_log2_, q.data, q.ld, sel.keys, d_, 0.0f, p,
             sel.count);
      matmul(Transpose::no, Transpose::yes, real, sel.count, d_, 1.0f, dout.data, dout.ld, sel.values, d_, 0.0f, ds,
             sel.count);
      for (std::int64_t r = 0; r < real; ++r) {
        float* p_row = p + r * sel.count;
        float* ds_row = ds + r * sel.count;
        exp2_shifted(p_row, sel.count, lse[r]);
        for (std::int64_t t = 0; t < sel.count; ++t) ds_row[t] = p_row[t] * (ds_row[t] - delta[r]);
      }
      matmul(Transpose::no, Transpose::no, real, d_, sel.count, scale_, ds, sel.count, sel.keys, d_, 0.0f, dq_block,
             d_);
    }
    add_mean_grad(dq_block, real, p_.dq_mean, (qb.batch * s_.heads + qb.head) * s_.num_q_blocks + qb.index);
    const auto dq = sequence_rows<T>(p_.dq, p_.in.layout);
    for (std::int64_t r = 0; r < rows_; ++r) store_row(dq_block + r * d_, dq.row(qb.batch, qb.head, first + r), d_);
  }

  // BackwardParams' block-mean gradient addend: mean row `mean_row` / count added to the
  // block's first `count` (real) rows, before they are rounded.
  void add_mean_grad(float* rows, std::int64_t count, const TensorRef& mean, std::int64_t mean_row) const {
    if (!mean.defined() || count == 0) return;
    const float* grad = static_cast<const float*>(mean.data) + mean_row * d_;
    for (std::int64_t r = 0; r < count; ++r)
      for (std::int64_t c = 0; c < d_; ++c) rows[r * d_ + c] += grad[c] / static_cast<float>(count);
  }

  // dv += Pᵀ·dout and dk += scale · dSᵀ·q over the valid keys of one kv
  // block, for every stored tile that lists it (over the tile's real query
  // rows). stored[n] is work item first_item + n. Rows past vbs are never
  // touched (they stay zero).
  void accumulate_dk_dv(std::int64_t kv_block, const TileLists& tiles, const StoredScores* stored,
                        std::int64_t first_item, const float* p_store, const float* ds_store, float* dk_all,
                        float* dv_all) const {
    Scratch& scratch = thread_scratch();
    const std::int64_t valid = detail::load_int(p_.in.variable_block_sizes, kv_block);
    float* dk = dk_all + kv_block * rows_ * d_;
    float* dv = dv_all + kv_block * rows_ * d_;
    for (const Tile& tile : tiles.of(kv_block)) {
      const QueryBlock qb = query_block(tile.item, s_);
      const std::int64_t first = qb.index * rows_;
      const StoredScores& at = stored[tile.item - first_item];
      if (at.rows == 0) continue;  // only padding rows: nothing stored, nothing added
      const FloatRows q = float_rows(q_, qb.batch, qb.head, first, at.rows, d_, scratch.queries);
      const FloatRows dout = float_rows(dout_, qb.batch, qb.head, first, at.rows, d_, scratch.douts);
      const float* p = p_store + at.offset + tile.column;
      const float* ds = ds_store + at.offset + tile.column;
      matmul(Transpose::yes, Transpose::no, valid, d_, at.rows, 1.0f, p, at.count, dout.data, dout.ld, 1.0f, dv, d_);
      matmul(Transpose::yes, Transpose::no, valid, d_, at.rows, scale_, ds, at.count, q.data, q.ld, 1.0f, dk, d_);
    }
  }

  void store_dk_dv(std::int64_t batch, std::int64_t kv_head, std::int64_t kv_block, float* dk_all,
                   float* dv_all) const {
    const std::int64_t valid = detail::load_int(p_.in.variable_block_sizes, kv_block);
    const std::int64_t mean_row = (batch * s_.kv_heads + kv_head) * s_.num_kv_blocks + kv_block;
    add_mean_grad(dk_all + kv_block * rows_ * d_, valid, p_.dk_mean, mean_row);
    add_mean_grad(dv_all + kv_block * rows_ * d_, valid, p_.dv_mean, mean_row);
    const auto dk_rows = sequence_rows<T>(p_.dk, p_.in.layout);
    const auto dv_rows = sequence_rows<T>(p_.dv, p_.in.layout);
    for (std::int64_t t = kv_block * rows_; t < (kv_block + 1) * rows_; ++t) {
      store_row(dk_all + t * d_, dk_rows.row(batch, kv_head, t), d_);
      store_row(dv_all + t * d_, dv_rows.row(batch, kv_head, t), d_);
    }
  }

  const BackwardParams& p_;
  const ProblemShape& s_;
  const float scale_, scale_log2_;
  const std::int64_t d_, rows_;
  const SequenceRows<const T> q_, k_, v_, out_, dout_;
  const float* lse_;
  const std::int64_t store_floats_;
};

}  // namespace

void backward(const BackwardParams& p, const ProblemShape& s, float scale, std::int64_t store_floats) {
  check_listed_keys(p.in, s);
  with_element_type(p.in.q.dtype,
                    [&](auto element) { BackwardPass<decltype(element)>(p, s, scale, store_floats).run(); });
}

}  // namespace vsa::cpu
