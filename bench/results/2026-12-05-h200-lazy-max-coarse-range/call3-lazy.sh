#!/usr/bin/env bash
# Prepared in session 38 (branch fwd-lazy-rescale 948b210; main b219f1b's kernels), prebuilt with
# nvcc 13.0 for sm_90a into .gpubin/lazy: main's kernel bench (kb-main), the branch's kernel bench
# and GPU tests (kb-lazy, tests-lazy), main's GPU tests with the branch's new forward test
# (tests-main-steep). The branch's forward tests on v2, v1 and the portable kernel; the new test on
# main's kernels; then main and the branch in turn, two rounds. Predicted: docs/kernel-notes.md,
# "A lazy running max". Copy to bench/results/<date>-h200-lazy-max/call1.sh before running.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commits: main b219f1b (kernels), branch fwd-lazy-rescale 948b210"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
for b in kb-main kb-lazy tests-lazy tests-main-steep; do gunzip -c .gpubin/lazy/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
F='-*Backward*:*Coarse*:*BlockMean*'
tests() {  # label, binary, VSA_CUDA_KERNEL (empty: the default), filter
  VSA_CUDA_KERNEL=$3 timeout 150 /tmp/$2 --gtest_filter="$4" > "$OUT/tests-$1.log" 2>&1
  echo "$1: rc $? ($((SECONDS - start)) s)" >> "$S"
  grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure|FAILED  \]" "$OUT/tests-$1.log" | head -8 >> "$S"
}
tests lazy-v2 tests-lazy "" "$F"
tests lazy-v1 tests-lazy sm90v1 "$F"
tests lazy-sm80 tests-lazy sm80 "$F"
tests main-steep tests-main-steep "" "*Steep*"
tests main-steep-sm80 tests-main-steep sm80 "*Steep*"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
run() {  # label, binary, VSA_CUDA_KERNEL; the kernel bench's arguments in KB
  echo "$(date -u +%T) $1 $KB: $(VSA_CUDA_KERNEL=$3 timeout 60 /tmp/$2 $KB 2>&1 | tail -n 1)" >> "$S"
}
echo "== $(date -u +%T) timings ($((SECONDS - start)) s)" >> "$S"
for r in 1 2; do
  for KB in "16 768 192 128 64 0 1 4" "16 768 64 128 64 0 1 8" "12 624 63 128 64 2 1 8" \
            "16 768 64 64 64 0 1 8" "16 384 32 128 128 0 1 8"; do
    run "main" kb-main ""; run "lazy" kb-lazy ""
  done
  KB="12 624 63 128 64 2 1 8"
  run "main sm80" kb-main sm80; run "lazy sm80" kb-lazy sm80
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
