#!/usr/bin/env bash
# Session 40, call 2: main (commit.txt, plus the GPU sweep's lse held to lse_tolerance: the
# working tree's one uncommitted change) with both branches landed (per-device allowance, list
# chunks) and the review fixes: `scripts/gpu.sh build ctest pytest` (the whole C++ suite on the
# default kernels through ctest, every Python test), and beside the build the C++ suite on the
# portable kernels (VSA_CUDA_KERNEL=sm80) from the binary prebuilt here (nvcc 13.0, sm_90a) from
# the same tree. Main now also holds the installed CMake package's OpenBLAS lookup, 17 Python
# fixes and the refusal of written tensors sharing memory with another of the call.
# Run from the checkout root with carry [".gpubin/s40b", ".whl", ".gtest"].
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/call.txt"  # gpu.sh writes summary.txt
{ echo "call 2: main $(cat .gpubin/s40b/commit.txt) + the sweep's lse tolerance"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,uuid --format=csv,noheader; } >> "$S" 2>&1
( VSA_COMMIT="$(cat .gpubin/s40b/commit.txt)+sweep-lse" VSA_GPU_BUDGET=555 OUT="$OUT" bash scripts/gpu.sh build ctest pytest > /tmp/gpu-job.log 2>&1; echo "gpu.sh rc $?" >> /tmp/gpu-job.log ) &
job=$!
gunzip -c .gpubin/s40b/tests-main.gz > /tmp/tests-main && chmod +x /tmp/tests-main
VSA_CUDA_KERNEL=sm80 timeout 200 /tmp/tests-main > "$OUT/tests-sm80.log" 2>&1
echo "sm80 suite (prebuilt): rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|FAILED  \]|SKIPPED \]" "$OUT/tests-sm80.log" | head -12 >> "$S"
wait $job; tail -n 3 /tmp/gpu-job.log >> "$S"
echo "== done ($((SECONDS - start)) s)" >> "$S"
