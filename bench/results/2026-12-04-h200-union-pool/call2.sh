#!/usr/bin/env bash
# Session 37, call 2 (prebuilt with nvcc 13.0 for sm_90a into .gpubin/bin: main's kernel bench,
# branch fwd-union-pool b4aff6c's kernel bench and GPU tests, and its kernel bench built with
# -DVSA_UNION_PROFILE). The branch's forward tests with VSA_FWD_UNION=1 (block order) and 2 (rank
# order); the profile build's cycles a warp by part; then main / block order / rank order in turn,
# two rounds. Predicted: docs/kernel-notes.md, "The union forward with K and V pools", call 2.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commits: branch b4aff6c"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
for b in kb-main kb-pool2 tests-pool2 kb-prof; do gunzip -c .gpubin/bin/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
F='-*Backward*:*Coarse*:*BlockMean*'
for order in 1 2; do
  VSA_FWD_UNION=$order timeout 120 /tmp/tests-pool2 --gtest_filter="$F" > "$OUT/tests-order$order.log" 2>&1
  echo "branch forward tests, VSA_FWD_UNION=$order: rc $? ($((SECONDS - start)) s)" >> "$S"
  grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure|FAILED  \]" "$OUT/tests-order$order.log" | head -12 >> "$S"
done
echo "== $(date -u +%T) profile build ($((SECONDS - start)) s)" >> "$S"
for order in 1 2; do
  for KB in "16 768 64 128 64 0 1 2" "12 624 63 128 64 2 1 2" "16 768 192 128 64 0 1 1"; do
    echo "-- order $order $KB" >> "$S"
    VSA_FWD_UNION=$order timeout 60 /tmp/kb-prof $KB > "$OUT/prof.tmp" 2>&1
    grep "union profile" "$OUT/prof.tmp" | tail -n 2 >> "$S"; tail -n 1 "$OUT/prof.tmp" >> "$S"
  done
done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
run() {  # label, binary, VSA_FWD_UNION; the kernel bench's arguments in KB
  echo "$(date -u +%T) $1 $KB: $(VSA_FWD_UNION=$3 timeout 60 /tmp/$2 $KB 2>&1 | tail -n 1)" >> "$S"
}
echo "== $(date -u +%T) timings ($((SECONDS - start)) s)" >> "$S"
for r in 1 2; do
  for KB in "16 768 192 128 64 0 1 4" "16 768 64 128 64 0 1 8" "24 256 32 128 64 0 1 8" "12 624 63 128 64 2 1 8"; do
    run "main " kb-main 0; run "block" kb-pool2 1; run "rank " kb-pool2 2
  done
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
