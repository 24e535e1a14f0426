// vsa::cpu_backend_info: what the CPU backend computes with on this machine.
#include "cpu/matmul.hpp"
#include "cpu/softmax_math.hpp"
#include "vsa/cpu.hpp"

namespace vsa {

CpuBackendInfo cpu_backend_info() { return CpuBackendInfo{cpu::math_library(), cpu::simd_level()}; }

}  // namespace vsa
