"""What a CPU run's numbers depend on: the CPU's name, what vsa's CPU backend computes with on it,
and the machine's measured fp32 matrix-product rate, the yardstick for the backend's efficiency."""

from __future__ import annotations

import math
import platform
import time

import torch

import vsa

# Square fp32 products this wide: large enough for a math library's peak on a few cores, small
# enough to time in a second or two.
_GEMM_SIZE = 2048
_GEMM_RUNS = 5


def cpu_model() -> str:
    """The CPU's marketing name (Linux's /proc/cpuinfo), else what platform knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _fastest_gflops(product, a, b) -> float:
    product(a, b)  # warm-up: thread start, packing buffers
    fastest = math.inf
    for _ in range(_GEMM_RUNS):
        start = time.perf_counter()
        product(a, b)
        fastest = min(fastest, time.perf_counter() - start)
    return 2 * _GEMM_SIZE**3 / fastest / 1e9


def fp32_gemm_rate() -> tuple[float, str]:
    """The machine's fp32 matrix-product rate in GFLOP/s, and who reached it: the fastest run of
    torch.mm (torch's threads, the count vsa's CPU backend uses too) and of numpy's matmul (its
    BLAS's default threads) on [2048, 2048] matrices. The best of both, so that the yardstick is
    what this machine can do, not what one library does on it."""
    a, b = (torch.randn(_GEMM_SIZE, _GEMM_SIZE) for _ in range(2))
    rates = {"torch.mm": _fastest_gflops(torch.mm, a, b)}
    try:
        import numpy
        rates["numpy matmul"] = _fastest_gflops(numpy.matmul, a.numpy(), b.numpy())
    except ModuleNotFoundError:
        pass
    best = max(rates, key=rates.get)
    return rates[best], best


def cpu_facts() -> dict:
    info = vsa.cpu_backend_info()
    gflops, by = fp32_gemm_rate()
    return {
        "cpu_model": cpu_model(),
        "cpu_simd": info["simd"],
        "cpu_math_library": info["math_library"],
        "cpu_fp32_gemm_gflops": round(gflops, 1),
        "cpu_fp32_gemm_by": by,
    }


def gemm_share_lines(results: list, gemm_gflops: float) -> list[str]:
    """One line per vsa row: its effective forward and backward rates as a share of the measured
    fp32 matrix-product rate. The effective count takes every row and every key of a listed block;
    a row told the real query rows computes fewer, so its share can pass 100 % (it says so)."""
    lines = []
    for r in results:
        if getattr(r, "backend", None) != "vsa" or r.fwd_tflops is None:
            continue
        parts = [f"fwd {1000 * r.fwd_tflops / gemm_gflops:.0%}"]
        if r.bwd_tflops is not None:
            parts.append(f"bwd {1000 * r.bwd_tflops / gemm_gflops:.0%}")
        counted = (" (effective count, padding rows and keys included: vsa computed only the real ones)"
                   if "real query rows only" in r.note else "")
        lines.append(f"  {r.case} keep {r.keep:.1%}: vsa at {', '.join(parts)} of the fp32 GEMM "
                     f"rate{counted}")
    return lines
