// The dispatcher's choice of kernel family and its override; no GPU needed.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cuda/cuda_backend.hpp"
#include "cuda/kernel_choice.hpp"
#include "scoped_env.hpp"
#include "vsa/attention.hpp"
#include "vsa/error.hpp"

namespace vsa::cuda {
namespace {

// Each test starts without VSA_CUDA_KERNEL; the value the process had (say
// sm80, for a run of the whole binary on the portable kernels) comes back after.
class KernelChoice : public ::testing::Test {
 protected:
  static bool built_with_sm90a() { return archs().find("90a") != std::string::npos; }

 private:
  test::ScopedEnv kernel_{"VSA_CUDA_KERNEL", nullptr};
};

TEST_F(KernelChoice, HopperGetsTheHopperKernelWhenBuiltForIt) {
  EXPECT_EQ(kernel_family_for(90), built_with_sm90a() ? KernelFamily::sm90 : KernelFamily::sm80);
}

TEST_F(KernelChoice, OtherArchitecturesGetThePortableKernel) {
  for (int cc : {80, 86, 89, 100, 103, 120}) EXPECT_EQ(kernel_family_for(cc), KernelFamily::sm80) << cc;
}

TEST_F(KernelChoice, OverrideSelectsThePortableKernelOnHopper) {
  setenv("VSA_CUDA_KERNEL", "sm80", 1);
  EXPECT_EQ(kernel_family_for(90), KernelFamily::sm80);
}

TEST_F(KernelChoice, OverrideSelectsEachHopperForwardVersion) {
  for (const KernelFamily version : {KernelFamily::sm90_v1, KernelFamily::sm90_ws}) {
    const std::string name = version == KernelFamily::sm90_v1 ? "sm90v1" : "sm90ws";
    EXPECT_EQ(kernel_family_name(version), name);
    EXPECT_TRUE(is_hopper(version));
    setenv("VSA_CUDA_KERNEL", name.c_str(), 1);
    if (built_with_sm90a())
      EXPECT_EQ(kernel_family_for(90), version) << name;
    else
      EXPECT_THROW(kernel_family_for(90), Error) << name;
    EXPECT_THROW(kernel_family_for(80), Error) << name;
  }
}

TEST_F(KernelChoice, HopperKernelElsewhereIsRefusedWithAReason) {
  setenv("VSA_CUDA_KERNEL", "sm90", 1);
  try {
    kernel_family_for(80);
    FAIL() << "expected vsa::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    EXPECT_NE(std::string(e.what()).find("VSA_CUDA_KERNEL"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("80"), std::string::npos) << e.what();
  }
}

TEST_F(KernelChoice, UnknownOverrideIsAnInvalidArgument) {
  setenv("VSA_CUDA_KERNEL", "sm75", 1);
  try {
    kernel_family_for(90);
    FAIL() << "expected vsa::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("sm75"), std::string::npos) << e.what();
  }
}

// The public query names the kernel dispatch will use for the device; with
// no device it explains instead of answering.
TEST_F(KernelChoice, PublicQueryNamesTheDevicesKernel) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    EXPECT_THROW(vsa::cuda_forward_kernel(0), Error);
    return;
  }
  EXPECT_EQ(vsa::cuda_forward_kernel(0), kernel_family_name(kernel_family_for(device_arch(0))));
  setenv("VSA_CUDA_KERNEL", "sm80", 1);
  EXPECT_EQ(vsa::cuda_forward_kernel(0), "sm80");
}

}  // namespace
}  // namespace vsa::cuda
