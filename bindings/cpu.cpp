#include "cpu.hpp"

#include <nanobind/stl/string.h>

#include "vsa/cpu.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vsa::python {

void bind_cpu(nb::module_& m) {
  m.def("set_cpu_threads", &set_cpu_threads, "threads"_a,
        "Threads the CPU backend uses (0: the hardware's count). The ops pass "
        "torch.get_num_threads() before each CPU call; VSA_NUM_THREADS overrides both.");
  m.def("cpu_threads", &cpu_threads, "The thread count the next CPU call will use.");
  m.def(
      "cpu_backend_info",
      [] {
        const CpuBackendInfo info = cpu_backend_info();
        nb::dict d;
        d["math_library"] = info.math_library;
        d["simd"] = info.simd;
        return d;
      },
      "{'math_library': ..., 'simd': ...}: what the CPU backend computes with on this CPU.");
}

}  // namespace vsa::python
