#!/usr/bin/env bash
# Session 36, call 5 (prebuilt with nvcc 13.0 for sm_90a into .gpubin/bin: main 0cb2580's kernel
# bench, branch fwd-zero-box 1ce6bf1's kernel bench and GPU tests). The forward of main and of the
# branch (a partial block's real keys as boxes of their height, V's rows after them from a zero
# tile) in turn, two rounds; then every GPU test of the branch.
# Predicted: docs/kernel-notes.md, "V's rows after a partial block's keys from a zero tile".
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commits: main $COMMIT, branch 1ce6bf1"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
for b in kb-main kb-zero tests-zero; do gunzip -c .gpubin/bin/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
run() {  # label, binary; the kernel bench's arguments in KB
  echo "$(date -u +%T) $1 $KB: $(timeout 60 /tmp/$2 $KB 2>&1 | tail -n 1)" >> "$S"
}
echo "== $(date -u +%T) timings ($((SECONDS - start)) s)" >> "$S"
for r in 1 2; do
  for KB in "24 2160 216 128 64 4 1 2" "12 624 63 128 64 2 1 8" "12 624 63 128 64 3 1 8" "12 624 63 64 64 2 1 8" \
            "16 768 64 128 64 0 1 8"; do
    run "main" kb-main; run "zero" kb-zero
  done
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) branch: every GPU test ($((SECONDS - start)) s)" >> "$S"
timeout $((590 - (SECONDS - start))) /tmp/tests-zero --gtest_brief=1 > "$OUT/tests-zero.log" 2>&1
echo "branch tests: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-zero.log" | head -8 >> "$S"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
