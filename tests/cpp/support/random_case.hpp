// Random attention cases for the property sweeps: every axis of the case
// matrix drawn at random (dtypes, layout, blk, D, GQA, B, NQ != NK, list
// capacity, int32/int64 lists, strided views, duplicates, scale), plus
// random block sizes, with a seed that replays any one case.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "support/attention_problem.hpp"

namespace vsa::test {

enum class SweepBackend { cpu, cuda };

// A random case; CUDA cases take 16-bit inputs only (fp32 is CPU-only).
AttentionCase random_attention_case(std::mt19937_64& rng, SweepBackend backend);

// Every block's valid tokens drawn again: full, empty or any partial size.
void randomize_block_sizes(AttentionProblem& problem, std::mt19937_64& rng);

// One line naming everything about a case, for failure messages.
std::string describe(const AttentionCase& c);

// The number of sweep cases: the environment variable when it holds a
// positive integer, otherwise `fallback`.
std::int64_t sweep_cases(const char* variable, std::int64_t fallback);

// The first seed of a sweep: VSA_SWEEP_SEED when set, else a fresh random
// one (case i uses seed + i; a failure prints how to replay it).
std::uint64_t sweep_seed();

}  // namespace vsa::test
