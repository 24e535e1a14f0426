#!/usr/bin/env bash
# Session 37, call 1 (prebuilt with nvcc 13.0 for sm_90a into .gpubin/bin: main's kernel bench
# (main's kernels, unchanged since 7015ffa), branch fwd-union-pool 931187b's kernel bench and GPU
# tests). The branch's forward tests with VSA_FWD_UNION=1 (the union forward with K and V pools);
# then the forward of main and of the branch, in turn, two rounds. Predicted: docs/kernel-notes.md,
# "The union forward with K and V pools".
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commits: branch 931187b"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
for b in kb-main kb-pool tests-pool; do gunzip -c .gpubin/bin/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
F='-*Backward*:*Coarse*:*BlockMean*'
VSA_FWD_UNION=1 timeout 120 /tmp/tests-pool --gtest_filter="$F" > "$OUT/tests-pool.log" 2>&1
echo "branch forward tests, VSA_FWD_UNION=1: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure|FAILED  \]" "$OUT/tests-pool.log" | head -12 >> "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
run() {  # label, binary, VSA_FWD_UNION; the kernel bench's arguments in KB
  echo "$(date -u +%T) $1 $KB: $(VSA_FWD_UNION=$3 timeout 60 /tmp/$2 $KB 2>&1 | tail -n 1)" >> "$S"
}
echo "== $(date -u +%T) timings ($((SECONDS - start)) s)" >> "$S"
for r in 1 2; do
  for KB in "16 768 192 128 64 0 1 4" "16 768 64 128 64 0 1 8" "24 256 32 128 64 0 1 8" "12 624 63 128 64 2 1 8"; do
    run "main " kb-main 0; run "pool " kb-pool 1
  done
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
