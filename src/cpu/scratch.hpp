// Per-thread scratch memory of the CPU backend. Each thread (the pool's and
// the caller's) keeps its buffers across work items and calls and grows them
// only when a larger problem comes, so a work item allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace vsa::cpu {

// Floats whose contents do not outlive one use: get() may reallocate, and
// leaves them uninitialized.
class ScratchBuffer {
 public:
  float* get(std::int64_t n) {
    const auto want = static_cast<std::size_t>(n);
    if (want > size_) {
      data_ = std::make_unique_for_overwrite<float[]>(want);
      size_ = want;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<float[]> data_;
  std::size_t size_ = 0;
};

// One thread's buffers, named by what the attention passes keep in them.
struct Scratch {
  ScratchBuffer keys, values;       // the gathered keys and values of one work item, [count, D]
  ScratchBuffer queries, douts;     // one query block's q and dout rows, [rows, D]
  ScratchBuffer scores, dscores;    // S (then P) and dP (then dS), [rows, keys]
  ScratchBuffer result, result2;    // an item's accumulators (out, dq, or dk and dv), [rows, D]
  ScratchBuffer row_stats;          // one value per query row (the forward's 1 / softmax sum)
  // Held by the thread that called the op, for the whole call (the pool's
  // threads write into them): the backward's stored P and dS of a chunk of
  // query blocks, and one GQA group's dk and dv accumulators.
  ScratchBuffer call_scores, call_grads;
};

// The calling thread's scratch.
inline Scratch& thread_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

}  // namespace vsa::cpu
