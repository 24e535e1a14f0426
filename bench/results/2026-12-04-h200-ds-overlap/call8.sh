#!/usr/bin/env bash
# Session 35, call 8 (prebuilt: main 7015ffa's kernel bench, and branch dq-four-ctas at 7671283:
# the Hopper dQ pass with two stages and four CTAs an SM; nvcc 13.0, sm_90a, .gpubin/bin).
# Tests of the branch: the backward suites. Then the backward, main and branch in turn, two rounds.
# Predicted (docs/kernel-notes.md, "The dQ pass at four CTAs an SM"): backward −0.5 to −2 % on H16
# top-192, −0.3 to −1.5 % on top-64, H24 NK256 top-32 and Wan (query padding).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commits: main 7015ffa, branch 7671283"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
for b in kb-main kb-dq4 tests-dq4; do gunzip -c .gpubin/bin/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
timeout 120 /tmp/tests-dq4 --gtest_brief=1 --gtest_filter='*CudaBackward*:CudaSweep.*Backward*' > "$OUT/tests-dq4.log" 2>&1
echo "branch: backward suites: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure|CudaSweep" "$OUT/tests-dq4.log" | head -8 >> "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
run() {  # label, binary, then the kernel bench's arguments in KB
  echo "$(date -u +%T) $1 $KB: $(timeout 90 /tmp/$2 $KB 2>&1 | tail -n 1)" >> "$S"
}
echo "== $(date -u +%T) timings ($((SECONDS - start)) s)" >> "$S"
for r in 1 2; do
  for KB in "16 768 192 128 64 0 2 4" "16 768 64 128 64 0 2 8" "24 256 32 128 64 0 2 8" "12 624 63 128 64 3 2 8"; do
    run "main" kb-main; run "dq4 " kb-dq4
  done
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
