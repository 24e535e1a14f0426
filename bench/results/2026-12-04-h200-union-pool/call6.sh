#!/usr/bin/env bash
# Session 37, call 6 (prebuilt with nvcc 13.0 for sm_90a into .gpubin/bin: main's kernel bench;
# branch fwd-union-pool b4aff6c's (kb-pool2, call 2's in-order pool) and 4d87cf2's profile build
# (kb-v2prof2: v2's S, softmax and P·V timed too); branch fwd-union-pool-sleep 80f4d65's kernel
# bench, GPU tests and profile build (the in-order pool whose request spins sleep 64 ns a miss)).
# v2's profile by part; the sleeping pool's forward tests and profile (rank order); then main, the
# in-order pool and the sleeping pool in rank order, in turn, two rounds. Predicted:
# docs/kernel-notes.md, "v2's chain a pair, and the union's spins asleep".
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commits: fwd-union-pool b4aff6c (kb-pool2), 4d87cf2 (kb-v2prof2); fwd-union-pool-sleep 80f4d65"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
for b in kb-main kb-pool2 kb-v2prof2 kb-pool-sleep kb-pool-sleep-prof tests-pool-sleep; do
  gunzip -c .gpubin/bin/$b.gz > /tmp/$b && chmod +x /tmp/$b
done
F='-*Backward*:*Coarse*:*BlockMean*'
VSA_FWD_UNION=2 timeout 120 /tmp/tests-pool-sleep --gtest_filter="$F" > "$OUT/tests-sleep.log" 2>&1
echo "sleeping pool's forward tests, VSA_FWD_UNION=2: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure|FAILED  \]" "$OUT/tests-sleep.log" | head -12 >> "$S"
echo "== $(date -u +%T) profiles ($((SECONDS - start)) s)" >> "$S"
for KB in "16 768 64 128 64 0 1 2" "16 768 192 128 64 0 1 1" "12 624 63 128 64 2 1 2"; do
  echo "-- $KB" >> "$S"
  timeout 60 /tmp/kb-v2prof2 $KB > "$OUT/prof.tmp" 2>&1; grep "v2 profile" "$OUT/prof.tmp" | tail -n 1 >> "$S"
  VSA_FWD_UNION=2 timeout 60 /tmp/kb-pool-sleep-prof $KB > "$OUT/prof.tmp" 2>&1; grep "union profile" "$OUT/prof.tmp" | tail -n 1 >> "$S"
done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
run() {  # label, binary, VSA_FWD_UNION; the kernel bench's arguments in KB
  echo "$(date -u +%T) $1 $KB: $(VSA_FWD_UNION=$3 timeout 60 /tmp/$2 $KB 2>&1 | tail -n 1)" >> "$S"
}
echo "== $(date -u +%T) timings ($((SECONDS - start)) s)" >> "$S"
for r in 1 2; do
  for KB in "16 768 192 128 64 0 1 4" "16 768 64 128 64 0 1 8" "12 624 63 128 64 2 1 8"; do
    run "main      " kb-main 0; run "pool rank " kb-pool2 2; run "sleep rank" kb-pool-sleep 2
  done
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
