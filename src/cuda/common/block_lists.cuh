// What every attention kernel knows about blocks: the 64-key tile it steps
// through K/V (and Q in the backward) by, and how block metadata is read —
// int32 or int64 as the caller stored it, through the read-only cache.
#pragma once

#include <cstdint>

namespace vsa::cuda {

constexpr int kTileRows = 64;  // rows per K/V (and backward Q) tile; a 128-token block is two

__device__ __forceinline__ std::int64_t load_meta(const void* p, bool is_64, std::int64_t i) {
  return is_64 ? __ldg(static_cast<const long long*>(p) + i)
               : static_cast<std::int64_t>(__ldg(static_cast<const int*>(p) + i));
}

}  // namespace vsa::cuda
