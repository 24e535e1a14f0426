#!/usr/bin/env bash
# Session 31, call 3: branch dq-lookahead (+ dq_finish's TileInBlock): the Hopper dQ pass's list
# lookups made a tile or two ahead of their copies. Tests: every C++ GPU test with the default
# kernels, memcheck of the stored path's tests. A/B of four vsa_kernel_bench binaries built off
# the device (.gpubin/bin): main, la3 (this branch: three stages, three CTAs), la4 (four stages,
# two CTAs), la9 (nine, one CTA), in turn; the dQ pass under Nsight Compute (H16 top-192) for
# each; then `vsa bench` beside FastVideo on the branch's build.
# Predicted (docs/kernel-notes.md): la3 dQ pass −8 to −15 %, H16 top-192 backward −2 to −4 %,
# top-64 and Wan −1 to −3 %.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
tk=$!
for v in main la3 la4 la9; do gunzip -c .gpubin/bin/kb-$v.gz > /tmp/kb-$v && chmod +x /tmp/kb-$v; done
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
grep -c "C75[0-9][0-9]" "$OUT/build.log" | sed 's/^/wgmma serialization warnings: /' >> "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
timeout 150 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1
echo "C++ GPU tests, default kernels: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -10 >> "$S"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='*GroupsOfUnits*:*QueryPadding*:*RepeatableBitForBit*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck (Hopper) rc $? ($((SECONDS - start)) s)" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
echo "== $(date -u +%T) A/B, 8 calls a timing, Hopper backward (default)" >> "$S"
for r in 1 2; do
  vs="main la3 la4 la9"; [[ $r == 2 ]] && vs="main la3"
  for case in "16 768 192 128 64 0 2 8" "16 768 64 128 64 0 2 8" "12 624 63 128 64 3 2 8" "24 256 32 128 64 0 2 8"; do
    for v in $vs; do
      echo "$(date -u +%T) sm90 $v $case: $(timeout 60 /tmp/kb-$v $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) Nsight Compute: the dQ pass, H16 top-192, one backward (six groups)" >> "$S"
for v in main la3 la4 la9; do
  timeout 40 ncu --metrics gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
    --csv --print-units base -k regex:dq_stored --launch-count 6 /tmp/kb-$v 16 768 192 128 64 0 2 1 > "$OUT/ncu-$v.csv" 2>&1
  echo "ncu $v rc $?" >> "$S"
done
wait $tk; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) vsa bench attention with FastVideo (the branch's build)" >> "$S"
PYTHONPATH=$PEERS timeout $((585 - (SECONDS - start))) vsa bench --case wan2.1-1.3b-480p --case synthetic-49k \
  --case synthetic-b2-16k --case synthetic-49k-top192 --case hunyuan-720p --backends vsa,fastvideo-tk,fastvideo-triton \
  --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -40 >> "$S"
rm -rf "$OUT/attention"
kill $smi 2>/dev/null
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
