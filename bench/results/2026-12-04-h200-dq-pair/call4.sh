#!/usr/bin/env bash
# Session 31, call 4 (prebuilt binaries only, no build on the device): does the dQ pass's proxy
# fence (fence.proxy.async: MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S in the SASS) make each step wait
# for the copies still in flight? vsa_kernel_bench built off the device (.gpubin/bin): main, and
# the dQ pass with no proxy fence at three stages (three CTAs an SM), four (two) and nine (one),
# in turn; the dQ pass under Nsight Compute for each; the backward GPU tests of the three-stage
# variant (a test binary built off the device). An experiment: whether the fence may go is a
# question of the memory model (CUTLASS's cp.async + GMMA mainloops issue none), not settled here.
# Predicted: if the MEMBAR waits for the copies in flight, no fence makes the pass's rate follow
# its ring's depth: nine stages fastest, three stages −10 to −25 % on the pass; if not, all level.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary-main.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } > "$S" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
for v in main nf3 nf4 nf9; do gunzip -c .gpubin/bin/kb-$v.gz > /tmp/kb-$v && chmod +x /tmp/kb-$v; done
gunzip -c .gpubin/bin/tests-nf3.gz > /tmp/tests-nf3 && chmod +x /tmp/tests-nf3
timeout 90 /tmp/tests-nf3 --gtest_filter='*Backward*' --gtest_brief=1 > "$OUT/tests-nf3.log" 2>&1
echo "C++ GPU backward tests, nf3: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-nf3.log" | head -10 >> "$S"
echo "== $(date -u +%T) A/B, 8 calls a timing, Hopper backward (default)" >> "$S"
for r in 1 2; do
  vs="main nf3 nf4 nf9"; [[ $r == 2 ]] && vs="main nf3"
  for case in "16 768 192 128 64 0 2 8" "12 624 63 128 64 3 2 8" "16 768 64 128 64 0 2 8"; do
    for v in $vs; do
      echo "$(date -u +%T) sm90 $v $case: $(timeout 40 /tmp/kb-$v $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) Nsight Compute: the dQ pass, H16 top-192, one backward (six groups)" >> "$S"
for v in main nf3 nf4 nf9; do
  timeout 30 ncu --metrics gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
    --csv --print-units base -k regex:dq_stored --launch-count 6 /tmp/kb-$v 16 768 192 128 64 0 2 1 > "$OUT/ncu-$v.csv" 2>&1
  echo "ncu $v rc $?" >> "$S"
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
