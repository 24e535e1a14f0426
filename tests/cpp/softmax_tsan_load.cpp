// The softmax's vector code in a -fsanitize=thread program (tests/cpp/CMakeLists.txt
// builds it so): with GCC's ISA clones the loader ran their instrumented ifunc
// resolver before ThreadSanitizer's runtime was set up, and every program
// linking such a build died before main.
#include <cstdio>

#include "cpu/softmax_math.hpp"

int main() {
  float x[3] = {1.0f, 3.0f, 2.0f};
  const float top = vsa::cpu::row_max(x, 3);
  const float sum = vsa::cpu::exp2_shifted(x, 3, top);  // 2^-2 + 2^0 + 2^-1
  std::printf("row_max %g, sum %g (%s)\n", static_cast<double>(top), static_cast<double>(sum),
              vsa::cpu::simd_level().c_str());
  return top == 3.0f && sum > 1.749f && sum < 1.751f ? 0 : 1;
}
