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

// The thread's scratch, or null before its first call and once it is freed.
// A pointer (trivially destructible), so that it can still be read after the
// thread's thread_local objects with destructors are destroyed.
inline thread_local Scratch* t_scratch = nullptr;

// Whether the thread's ThreadScratchOwner has run its destructor (trivially destructible too).
inline thread_local bool t_scratch_owner_gone = false;

// Frees the thread's scratch when the thread ends.
struct ThreadScratchOwner {
  ThreadScratchOwner() = default;
  ThreadScratchOwner(const ThreadScratchOwner&) = delete;
  ThreadScratchOwner& operator=(const ThreadScratchOwner&) = delete;
  ~ThreadScratchOwner() {
    delete t_scratch;
    t_scratch = nullptr;
    t_scratch_owner_gone = true;
  }
};

// The calling thread's scratch. A thread may call after its thread_local
// objects are destroyed: the main thread from an atexit handler or a static
// object's destructor (which run after them), any thread from a destructor of
// its own thread_local objects. Such a call gets scratch of its own, never
// freed (a thread_local Scratch was destroyed by then, and the call wrote
// into the buffers its destruction had freed). It does not pass the owner's
// definition again: control passing through a destroyed block-scope
// thread_local's definition is undefined behaviour ([basic.start.term]).
inline Scratch& thread_scratch() {
  if (t_scratch == nullptr) {
    t_scratch = new Scratch;
    if (!t_scratch_owner_gone) {
      thread_local ThreadScratchOwner owner;  // made on the thread's first call only
    }
  }
  return *t_scratch;
}

}  // namespace vsa::cpu
