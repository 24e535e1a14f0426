#!/usr/bin/env bash
# Session 35, call 1 (prebuilt binaries of d345c74, nvcc 13.0 for sm_90a, carried in .gpubin/bin):
# the stored-dS backward with a group's dQ pass beside the next group's key pass
# (VSA_CUDA_DS_OVERLAP=<least groups>, a second stream of the highest priority;
# VSA_CUDA_DS_SIDE_PRIORITY=normal for the lowest). Tests: the graph-capture test alone (the
# side stream made inside a capture), every C++ GPU test with overlap off (main's passes), the
# backward suites with overlap at 2 and 3 groups. Then a clock log (20 ms) over one group's
# passes (20 GB cap: key pass ~19 ms, dQ pass ~7 ms), and the backward timed with overlap off,
# 4, 8 and 4 at normal priority, in turn, two rounds.
# Predicted (docs/kernel-notes.md, "A group's dQ pass beside the next group's key pass"): H16
# top-192 −0 to −2 % at 4 or 8 groups, +1 to +3 % at normal priority; top-64, H24 NK256 top-32
# and Wan −0 to −1.5 %.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
gunzip -c .gpubin/bin/kb.gz > /tmp/kb && chmod +x /tmp/kb
gunzip -c .gpubin/bin/tests.gz > /tmp/tests && chmod +x /tmp/tests
VSA_CUDA_KERNEL= /tmp/tests --gtest_filter='CudaBackwardStoredDs.OverlappedPassesReplayFromAGraph' > "$OUT/tests-graph.log" 2>&1
echo "graph-capture test alone: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|Failure" "$OUT/tests-graph.log" | head -4 >> "$S"
timeout 150 /tmp/tests --gtest_brief=1 > "$OUT/tests.log" 2>&1
echo "C++ GPU tests, overlap off: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -12 >> "$S"
for groups in 2 3; do
  VSA_CUDA_DS_OVERLAP=$groups timeout 100 /tmp/tests --gtest_brief=1 --gtest_filter='*CudaBackward*:CudaSweep.*Backward*' \
    > "$OUT/tests-overlap$groups.log" 2>&1
  echo "backward suites, overlap $groups: rc $? ($((SECONDS - start)) s)" >> "$S"
  grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-overlap$groups.log" | head -8 >> "$S"
done
run() {  # label, env settings..., then the kernel bench's arguments in KB
  local label=$1; shift
  echo "$(date -u +%T) $label $KB: $(env "$@" timeout 90 /tmp/kb $KB 2>&1 | tail -n 1)" >> "$S"
}
echo "== $(date -u +%T) one group, clock log ($((SECONDS - start)) s)" >> "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw.instant,power.draw,clocks_event_reasons.active --format=csv -lms 20 \
  > "$OUT/smi-one-group.log" 2>&1 &
smi=$!
KB="16 768 192 128 64 0 2 8"
run "one group, off " VSA_CUDA_DS_WORKSPACE_MB=20480
kill $smi 2>/dev/null
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
echo "== $(date -u +%T) timings ($((SECONDS - start)) s)" >> "$S"
for r in 1 2; do
  for KB in "16 768 192 128 64 0 2 4" "16 768 64 128 64 0 2 8" "24 256 32 128 64 0 2 8" "12 624 63 128 64 3 2 8"; do
    run "off    " VSA_CUDA_DS_OVERLAP=off; run "4      " VSA_CUDA_DS_OVERLAP=4; run "8      " VSA_CUDA_DS_OVERLAP=8
    run "4 norm " VSA_CUDA_DS_OVERLAP=4 VSA_CUDA_DS_SIDE_PRIORITY=normal
  done
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
