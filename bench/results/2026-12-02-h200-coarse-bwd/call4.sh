#!/usr/bin/env bash
# Session 14, call 4 (the device budget's last ~200 s): a list's eight range counts side by side
# (the scan reads two int4 per list). The C++ build only; the GPU backward tests (every CudaBackward
# case, the 200-case sweep, the sweep against the CPU backend); ncu durations of the four list kernels
# in vsa_kernel_bench's backward (Wan shape, random lists).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
echo "== $(date -u +%T) GPU backward tests (new)" >> "$S"
timeout 100 build/gpu/tests/cuda/vsa_cuda_tests --gtest_filter='*CudaBackward*:*CudaSweep.Backward*' \
  > "$OUT/bwd-tests.log" 2>&1; echo "rc $?" >> "$S"; grep -E "PASSED|FAILED|tests ran" "$OUT/bwd-tests.log" >> "$S"
echo "== $(date -u +%T) ncu: the list kernels (new)" >> "$S"
timeout 60 ncu --clock-control none -k "regex:count_kernel|scan_kernel|place_kernel|order_kernel" --launch-count 4 \
  --section SpeedOfLight build/gpu/bench/kernel/vsa_kernel_bench 12 624 63 128 64 2 2 > "$OUT/ncu-lists.log" 2>&1
echo "ncu rc $?" >> "$S"; grep -E "^  [a-zA-Z_].*\(|Duration" "$OUT/ncu-lists.log" >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
