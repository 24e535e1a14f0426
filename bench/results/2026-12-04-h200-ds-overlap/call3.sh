#!/usr/bin/env bash
# Session 35, call 3 (prebuilt binaries: main 7015ffa's kernel bench, and the branch
# fwd-bar-arrive at 22b7ac0: forward v2 with named barriers, only the producer's warp waiting;
# nvcc 13.0 for sm_90a, carried in .gpubin/bin). Tests of the branch: the Hopper forward suites
# and their racecheck (four shards). Then the forward, main and branch in turn, two rounds, and
# Nsight Compute's warp-state and stall-sampling sections for main's Wan forward.
# Predicted (docs/kernel-notes.md, "Forward v2: only the producer's warp waits"): Wan −0 to
# −1.5 %, H16 top-64 and top-192 −0 to −1 %, H24 NK2160 top-216 −0 to −1.5 %, D = 64 −0 to −1 %.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commits: main 7015ffa, branch 22b7ac0"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
for b in kb-main kb-bar tests-bar; do gunzip -c .gpubin/bin/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
filter='*CudaForward*:*CudaPartialBlocks*:CudaSweep.*Forward*:CudaSweep.*Phase*:CudaFailedCall*'
timeout 120 /tmp/tests-bar --gtest_brief=1 --gtest_filter="$filter" > "$OUT/tests-bar.log" 2>&1
echo "branch: Hopper forward suites: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure|CudaSweep" "$OUT/tests-bar.log" | head -8 >> "$S"
pids=()
for shard in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$shard VSA_GPU_SWEEP_CASES=16 timeout 200 compute-sanitizer --tool racecheck \
    --error-exitcode 99 --print-limit 10 /tmp/tests-bar --gtest_brief=1 --gtest_filter="$filter" > "$OUT/racecheck$shard.log" 2>&1 &
  pids+=($!)
done
for shard in 0 1 2 3; do wait "${pids[shard]}"; echo "branch: racecheck shard $shard: rc $?" >> "$S"; done
grep -h -E "RACECHECK SUMMARY|^\[  PASSED|^\[  FAILED" "$OUT"/racecheck*.log >> "$S"
echo "racecheck done ($((SECONDS - start)) s)" >> "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
run() {  # label, binary, then the kernel bench's arguments in KB
  echo "$(date -u +%T) $1 $KB: $(timeout 90 /tmp/$2 $KB 2>&1 | tail -n 1)" >> "$S"
}
echo "== $(date -u +%T) timings ($((SECONDS - start)) s)" >> "$S"
for r in 1 2; do
  for KB in "12 624 63 128 64 2 1 8" "16 768 64 128 64 0 1 8" "16 768 192 128 64 0 1 4" "12 624 63 64 64 2 1 8" \
            "24 2160 216 128 64 0 1 1"; do
    run "main" kb-main; run "bar " kb-bar
  done
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) Nsight Compute, main's Wan forward ($((SECONDS - start)) s)" >> "$S"
timeout 150 ncu --clock-control none --kernel-name regex:fwd_tma_kernel --launch-skip 30 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
  /tmp/kb-main 12 624 63 128 64 2 1 1 > "$OUT/ncu-wan.log" 2>&1
echo "ncu: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "Duration|SM Frequency|Warp Cycles Per Issued|Issue Slots Busy|Eligible Warps|Stall|stall" "$OUT/ncu-wan.log" | head -40 >> "$S"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
