#!/usr/bin/env bash
# Session 39: main's whole C++ GPU suite on the H200 (its CUDA host code changed since 8511fdd:
# support checks, arch list, env parsing), default kernels, then the portable ones. Prebuilt
# with nvcc 13.0 for sm_90a (main/commit.txt). Run from the checkout root with carry
# [".gpubin/main"].
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/main-summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: main $(cat .gpubin/main/commit.txt)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } > "$S" 2>&1
gunzip -c .gpubin/main/tests-main.gz > /tmp/tests-main && chmod +x /tmp/tests-main
for kernel in default sm80; do
  env $([[ $kernel == default ]] || echo VSA_CUDA_KERNEL=$kernel) timeout ${T:-270} /tmp/tests-main > "$OUT/main-tests-$kernel.log" 2>&1
  echo "$kernel: rc $? ($((SECONDS - start)) s)" >> "$S"
  grep -E "^\[  PASSED|^\[  FAILED|tests ran|FAILED  \]|SKIPPED \]" "$OUT/main-tests-$kernel.log" | head -12 >> "$S"
done
