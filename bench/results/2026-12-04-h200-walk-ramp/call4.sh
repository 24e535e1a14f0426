#!/usr/bin/env bash
# Session 34, call 4: call 3's one failing Python test again, its stale assertion mended (it
# asked the fine stage's kernel names to contain "fwd_kernel"; v2's is fwd_tma_kernel), with the
# rest of its file; then the sanitizers over the C++ GPU tests (ad98846's prebuilt binary, as in
# call 3): memcheck on both kernel families, racecheck, synccheck and initcheck on the Hopper
# one (16 sweep cases each; racecheck on the portable family outlasts a call, 2026-12-01).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
mkdir -p build/gpu/tests/cuda
gunzip -c .gpubin/bin/tests-ramp.gz > build/gpu/tests/cuda/vsa_cuda_tests && chmod +x build/gpu/tests/cuda/vsa_cuda_tests
VSA_COMMIT=$COMMIT VSA_PYTEST_ARGS=tests/python/test_bench_gpu.py OUT=$OUT/pytest timeout 150 bash scripts/gpu.sh python pytest > /dev/null 2>&1
echo "== pytest rc $? ($((SECONDS - start)) s)" >> "$OUT/pytest/summary.txt"
rm -f "$OUT/pytest/build.log"
VSA_COMMIT=$COMMIT VSA_SANITIZE_TOOLS=memcheck VSA_SANITIZE_KERNELS="sm90 sm80" VSA_SANITIZE_TIMEOUT=120 OUT=$OUT/memcheck \
  timeout 250 bash scripts/gpu.sh sanitize > /dev/null 2>&1
echo "== memcheck rc $? ($((SECONDS - start)) s)" >> "$OUT/memcheck/summary.txt"
VSA_COMMIT=$COMMIT VSA_SANITIZE_TOOLS="racecheck synccheck initcheck" VSA_SANITIZE_KERNELS=sm90 VSA_SANITIZE_TIMEOUT=150 \
  OUT=$OUT/hopper-checks timeout $((570 - (SECONDS - start))) bash scripts/gpu.sh sanitize > /dev/null 2>&1
echo "== racecheck, synccheck, initcheck rc $? ($((SECONDS - start)) s)" >> "$OUT/hopper-checks/summary.txt"
gzip -f "$OUT"/*/sanitize.log
