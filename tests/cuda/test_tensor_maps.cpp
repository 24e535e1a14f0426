// The Hopper kernels' TMA descriptors (sm90/tensor_maps.hpp). When the driver refuses one, the
// kernel that wanted it falls back to cp.async: the results stay right and only the time says
// so. These tests say it directly for the views the kernels meet most: contiguous q, k, v, dout
// in both layouts, head dims 64 and 128.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "cuda/common/kernel_params.hpp"
#include "cuda/sm90/tensor_maps.hpp"
#include "device_buffer.hpp"

namespace vsa::cuda::sm90 {
namespace {

constexpr int kBatch = 2, kHeads = 3;
constexpr std::int64_t kSeq = 256;

bool is_hopper_or_later() {
  int device = 0, major = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major >= 9;
}

// Element strides of a contiguous [B, S, H, D] (bshd) or [B, H, S, D] view.
SeqStrides contiguous(bool bshd, int head_dim) {
  if (bshd) return {kSeq * kHeads * head_dim, head_dim, static_cast<std::int64_t>(kHeads) * head_dim};
  return {kHeads * kSeq * head_dim, kSeq * head_dim, head_dim};
}

class CudaTensorMaps : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
    if (!is_hopper_or_later()) GTEST_SKIP() << "TMA needs compute capability 9.0";
    ASSERT_EQ(cudaMalloc(&data_, static_cast<std::size_t>(kBatch) * kHeads * kSeq * 128 * 2), cudaSuccess);
  }
  void TearDown() override { cudaFree(data_); }
  void* data_ = nullptr;
};

TEST_P(CudaTensorMaps, DriverAcceptsTheForwardMaps) {
  const auto [head_dim, bshd] = GetParam();
  FwdKernelParams p{};
  p.q = p.k = p.v = data_;
  p.q_stride = p.k_stride = p.v_stride = contiguous(bshd, head_dim);
  p.heads = kHeads;
  FwdTensorMaps maps;
  EXPECT_TRUE(encode_fwd_tensor_maps(p, true, kBatch, kHeads, kSeq, kSeq, head_dim, maps));
}

// The stored-dS key pass's q and dout maps: a box is a whole [64][D] tile, its 64-column blocks
// a dimension 128 bytes apart inside a row (encode_bwd_query_maps).
TEST_P(CudaTensorMaps, DriverAcceptsTheKeyPassQueryMaps) {
  const auto [head_dim, bshd] = GetParam();
  BwdKernelParams p{};
  p.q = p.dout = data_;
  p.q_stride = p.dout_stride = contiguous(bshd, head_dim);
  p.heads = kHeads;
  p.seq_q = kSeq;
  for (const bool is_bf16 : {true, false}) {
    BwdQueryMaps maps;
    EXPECT_TRUE(encode_bwd_query_maps(p, is_bf16, kBatch, head_dim, maps)) << (is_bf16 ? "bf16" : "fp16");
  }
}

INSTANTIATE_TEST_SUITE_P(HeadDimsAndLayouts, CudaTensorMaps,
                         ::testing::Combine(::testing::Values(64, 128), ::testing::Bool()));

}  // namespace
}  // namespace vsa::cuda::sm90
