#!/usr/bin/env bash
# Session 36, call 3 (prebuilt with nvcc 13.0 for sm_90a into .gpubin/bin: main 2d290ff's kernel
# bench, branch fwd-partial-first c6ff70d's kernel bench and GPU tests, the probe with `quick`).
# (1) The probe on Wan 480p and HunyuanVideo 720p with a partial block's tiles requested three
# ways (oob as v2 on main, whole, rows). (2) The branch's tests, except backward and layer ones,
# with the whole box and with real rows (VSA_FWD_PARTIAL_ROWS=1). (3) The forward of main, the
# branch's whole box and its real rows in turn, two rounds.
# Predicted: docs/kernel-notes.md, "A partial block's real keys first".
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commits: main $COMMIT, branch c6ff70d"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
for b in kv_floor_probe kb-main kb-first tests-first; do gunzip -c .gpubin/bin/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
P="$OUT/probe.log"
for args in "12 624 63 21 30 52 0 oob" "12 624 63 21 30 52 0 whole" "12 624 63 21 30 52 0 rows" \
            "24 2160 216 33 45 80 132 oob" "24 2160 216 33 45 80 132 whole" "24 2160 216 33 45 80 132 rows"; do
  echo "$(date -u +%T) probe $args quick" >> "$P"
  timeout 100 /tmp/kv_floor_probe $args quick >> "$P" 2>&1; echo "rc $?" >> "$P"
done
echo "== $(date -u +%T) probe done ($((SECONDS - start)) s)" >> "$S"
F='-*Backward*:*Coarse*:*BlockMean*'
for rows in 0 1; do
  VSA_FWD_PARTIAL_ROWS=$rows timeout 150 /tmp/tests-first --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests-rows$rows.log" 2>&1
  echo "branch tests, VSA_FWD_PARTIAL_ROWS=$rows: rc $? ($((SECONDS - start)) s)" >> "$S"
  grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-rows$rows.log" | head -6 >> "$S"
done
run() {  # label, binary, VSA_FWD_PARTIAL_ROWS; the kernel bench's arguments in KB
  echo "$(date -u +%T) $1 $KB: $(VSA_FWD_PARTIAL_ROWS=$3 timeout 60 /tmp/$2 $KB 2>&1 | tail -n 1)" >> "$S"
}
echo "== $(date -u +%T) timings ($((SECONDS - start)) s)" >> "$S"
for r in 1 2; do
  for KB in "12 624 63 128 64 2 1 8" "12 624 63 128 64 3 1 8" "12 624 63 64 64 2 1 8" "16 768 64 128 64 0 1 8" \
            "24 2160 216 128 64 1 1 2"; do
    run "main " kb-main 0; run "whole" kb-first 0; run "rows " kb-first 1
  done
done
kill $smi 2>/dev/null
grep -E "probe|GB| 6 CTAs| 2 CTAs/SM x 3| 3 CTAs/SM x 2| 4 CTAs" "$P" >> "$S"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
