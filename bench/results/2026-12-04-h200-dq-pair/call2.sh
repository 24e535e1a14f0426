#!/usr/bin/env bash
# Session 31, call 2: branch dq-deep (+ dq_finish's TileInBlock): the Hopper dQ pass as one CTA
# an SM with a ring of nine stages (D = 128). Tests: every C++ GPU test with the default
# kernels, memcheck of the stored path's tests. A/B of four vsa_kernel_bench binaries built off
# the device from the same tree, differing only in the dQ pass's ring (.gpubin/bin): main (three
# stages, three CTAs an SM), s4 (four, two CTAs), s6 (six, one CTA), deep9 (nine, one CTA), in
# turn, two rounds, on four shapes; the dQ pass under Nsight Compute (H16 top-192) for each.
# Predicted (docs/kernel-notes.md): deep9 dQ pass −12 to −22 %, top-192 backward −3 to −6 %,
# Wan and top-64 −2 to −5 %; s4 level; s6 +10 to +20 % on the pass.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
for v in main s4 s6 deep9; do gunzip -c .gpubin/bin/kb-$v.gz > /tmp/kb-$v && chmod +x /tmp/kb-$v; done
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
grep -c "C75[0-9][0-9]" "$OUT/build.log" | sed 's/^/wgmma serialization warnings: /' >> "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
timeout 150 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1
echo "C++ GPU tests, default kernels: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -10 >> "$S"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='*GroupsOfUnits*:*QueryPadding*:*RepeatableBitForBit*:DimsAndBlocks/CudaBackwardPartialBlocks.*/1' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck (Hopper) rc $? ($((SECONDS - start)) s)" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
echo "== $(date -u +%T) A/B, 8 calls a timing, Hopper backward (default): main, s4, s6, deep9 in turn" >> "$S"
for r in 1 2; do
  for case in "16 768 192 128 64 0 2 8" "16 768 64 128 64 0 2 8" "12 624 63 128 64 3 2 8" "24 256 32 128 64 0 2 8"; do
    for v in main s4 s6 deep9; do
      echo "$(date -u +%T) sm90 $v $case: $(timeout 60 /tmp/kb-$v $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) Nsight Compute: the dQ pass, H16 top-192, one backward (six groups)" >> "$S"
for v in main s4 s6 deep9; do
  timeout 60 ncu --metrics gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
    --csv --print-units base -k regex:dq_stored --launch-count 6 /tmp/kb-$v 16 768 192 128 64 0 2 1 > "$OUT/ncu-$v.csv" 2>&1
  echo "ncu $v rc $?" >> "$S"
done
kill $smi 2>/dev/null
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
