#!/usr/bin/env bash
# Session 32, call 1 (prebuilt binaries only, built off the device with nvcc 13.0 for sm_90a,
# .gpubin/bin): main (5302ebb), tma (the dQ pass's whole tiles by TMA + dq_finish's row offset
# from its tile's place: this commit's tree) and ppb (main + branch pair-p-buffers: the
# 128-token forward's P in two buffers). Tests: every C++ GPU test of tma; memcheck of the
# stored path's tests on tma; the forward tests and the 1,000-case sweep on ppb. Then A/B in
# turn, two rounds: the backward, main vs tma; the 128-token forward, main vs ppb; the dQ pass
# under Nsight Compute (time, L2 reads, warp stall reasons), main vs tma.
# Predicted (docs/kernel-notes.md): tma dQ pass −4 to −10 % on H16 top-192, that backward −1 to
# −3 %, Wan −0.5 to −2 %; ppb blk128 forward −3 to −8 %.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary-main.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } > "$S" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
for v in main tma ppb; do gunzip -c .gpubin/bin/kb-$v.gz > /tmp/kb-$v && chmod +x /tmp/kb-$v; done
for v in tma ppb; do gunzip -c .gpubin/bin/tests-$v.gz > /tmp/tests-$v && chmod +x /tmp/tests-$v; done
timeout 170 /tmp/tests-tma --gtest_brief=1 > "$OUT/tests-tma.log" 2>&1
echo "C++ GPU tests, tma, default kernels: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-tma.log" | head -10 >> "$S"
timeout 70 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 /tmp/tests-tma \
  --gtest_filter='*GroupsOfUnits*:*QueryPadding*:*RepeatableBitForBit*:DimsAndBlocks/CudaBackwardPartialBlocks.*/1' --gtest_brief=1 > "$OUT/memcheck-tma.log" 2>&1
echo "memcheck tma rc $? ($((SECONDS - start)) s)" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck-tma.log" | head -5 >> "$S"
timeout 90 /tmp/tests-ppb --gtest_filter='*CudaForward*:*CudaPartialBlocks*:CudaSweep.*' --gtest_brief=1 > "$OUT/tests-ppb.log" 2>&1
echo "C++ GPU forward tests and sweep, ppb: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-ppb.log" | head -10 >> "$S"
echo "== $(date -u +%T) A/B, 8 calls a timing: Hopper backward main/tma, 128-token forward main/ppb" >> "$S"
for r in 1 2; do
  for case in "16 768 192 128 64 0 2 8" "12 624 63 128 64 3 2 8" "16 768 64 128 64 0 2 8"; do
    for v in main tma; do
      echo "$(date -u +%T) sm90 $v $case: $(timeout 60 /tmp/kb-$v $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
  for case in "16 384 32 128 128 0 1 8" "16 384 96 128 128 0 1 8"; do
    for v in main ppb; do
      echo "$(date -u +%T) sm90 $v $case: $(timeout 60 /tmp/kb-$v $case 2>&1 | tail -n 2 | tr '\n' ' ')" >> "$S"
    done
  done
done
echo "== $(date -u +%T) Nsight Compute: the dQ pass, H16 top-192, one backward (six groups)" >> "$S"
for v in main tma; do
  timeout 40 ncu --metrics gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_op_read.sum,dram__bytes_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed \
    --csv --print-units base -k regex:dq_stored --launch-count 6 /tmp/kb-$v 16 768 192 128 64 0 2 1 > "$OUT/ncu-$v.csv" 2>&1
  echo "ncu $v rc $?" >> "$S"
  timeout 60 ncu --section WarpStateStats --section SchedulerStats --csv --print-units base -k regex:dq_stored \
    --launch-count 1 /tmp/kb-$v 16 768 192 128 64 0 2 1 > "$OUT/ncu-stalls-$v.csv" 2>&1
  echo "ncu stalls $v rc $?" >> "$S"
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
