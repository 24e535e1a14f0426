#!/usr/bin/env bash
# Session 30, call 1: branch portable-next-after-scores against main (8dacafc, .gpubin/main)
# built beside it. The branch: (1) the portable atomic key pass with two query stages where they
# keep two CTAs per SM (sm_90 at D = 128 and 64), the next pair's copy requested after the score
# products, so the CTA barrier before it goes; (2) delta neither reads nor writes padding query
# rows, and dq_finish reads no padding row's sums. Tests: every C++ GPU test with the default
# kernels and again with the portable ones (VSA_CUDA_KERNEL=sm80), memcheck of the portable
# backward; the A/B (8 calls a timing, main and branch in turn, two rounds) of the portable
# backward on four shapes and the Hopper one on two; dense FA2's backward; per-kernel times of the
# portable backward and of FA2's; SM clock and power sampled throughout (smi.log).
# Predicted before the call (docs/kernel-notes.md): portable −0.5 to −2 % at D = 128, level to
# −1 % at D = 64; the row passes −0.3 to −0.6 % on the portable backward with query padding
# (partial 3), level without; the Hopper backward level.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
timeout 120 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1
echo "C++ GPU tests, default kernels: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -10 >> "$S"
VSA_CUDA_KERNEL=sm80 timeout 120 $t --gtest_brief=1 > "$OUT/tests-sm80.log" 2>&1
echo "C++ GPU tests, VSA_CUDA_KERNEL=sm80: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-sm80.log" | head -10 >> "$S"
VSA_CUDA_KERNEL=sm80 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='DimsAndBlocks/CudaBackwardPartialBlocks.*/0:*QueryPadding*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck (portable) rc $? ($((SECONDS - start)) s)" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
wait $(jobs -p | grep -v "^$smi$") 2>/dev/null; cat /tmp/main.rc >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B, 8 calls a timing, portable (VSA_CUDA_KERNEL=sm80): main, new in turn" >> "$S"
for r in 1 2; do
  for case in "12 624 63 128 64 2 2 8" "12 624 63 128 64 3 2 8" "16 768 64 128 64 0 2 8" "12 624 63 64 64 2 2 8"; do
    for v in main new; do
      echo "$(date -u +%T) sm80 $v $case: $(VSA_CUDA_KERNEL=sm80 timeout 60 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) A/B, 8 calls a timing, Hopper (default): main, new in turn" >> "$S"
for r in 1 2; do
  for case in "12 624 63 128 64 3 2 8" "24 256 32 128 64 0 2 8"; do
    for v in main new; do
      echo "$(date -u +%T) sm90 $v $case: $(timeout 60 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) dense FA2 backward, then per-kernel times" >> "$S"
timeout 60 python3 bench/results/2026-12-02-h200-portable-bwd/fa2_dense_bwd_time.py >> "$S" 2>&1
K=bench/results/2026-12-04-h200-portable-stages/bwd_kernels.py
VSA_CUDA_KERNEL=sm80 timeout 60 python3 $K > "$OUT/kernels.log" 2>&1
timeout 60 python3 $K >> "$OUT/kernels.log" 2>&1
timeout 90 python3 $K fa2 >> "$OUT/kernels.log" 2>&1
echo "kernels rc $?" >> "$S"
kill $smi 2>/dev/null
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
