#!/usr/bin/env bash
# Session 31, call 1: branch dq-pair (+ dq_finish's TileInBlock) against main (22cb26e,
# .gpubin/main) built beside it. The branch: the Hopper dQ pass of the stored-dS path runs a CTA
# per two 64-row query tiles, a KV block both lists hold one step with its K tile read once
# (sm90/dq_tile_pair.cuh); dq_finish works out a tile's place in its query block once. Tests:
# every C++ GPU test with the default kernels (two new ones aimed at the pair's walk), the
# backward tests with VSA_CUDA_KERNEL=sm80, memcheck of the new tests and the stored path's
# groups; the A/B (8 calls a timing, main and branch in turn, two rounds) of the Hopper backward
# on five shapes; the dQ pass's time and bytes under Nsight Compute (H16 top-192), main and branch.
# Predicted before the call (docs/kernel-notes.md): top-192 −1 to −2.5 % (dQ pass −4 to −8 %),
# top-64, B2 and Wan level to −1 %, 128-token blocks −3 to −6 %.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
grep -c "C75[0-9][0-9]" "$OUT/build.log" | sed 's/^/wgmma serialization warnings: /' >> "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
timeout 150 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1
echo "C++ GPU tests, default kernels: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -10 >> "$S"
VSA_CUDA_KERNEL=sm80 timeout 90 $t --gtest_filter='*Backward*' --gtest_brief=1 > "$OUT/tests-sm80.log" 2>&1
echo "C++ GPU backward tests, VSA_CUDA_KERNEL=sm80: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-sm80.log" | head -10 >> "$S"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='*NeighbouringLists*:*LongerThanTheSharedBlockMap*:*GroupsOfUnits*:*QueryPadding*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck (Hopper) rc $? ($((SECONDS - start)) s)" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
wait $(jobs -p | grep -v "^$smi$") 2>/dev/null; cat /tmp/main.rc >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B, 8 calls a timing, Hopper backward (default): main, new in turn" >> "$S"
for r in 1 2; do
  for case in "16 768 192 128 64 0 2 8" "16 768 64 128 64 0 2 8" "12 624 63 128 64 3 2 8" "16 384 32 128 128 0 2 8" "24 256 32 128 64 0 2 8"; do
    for v in main new; do
      echo "$(date -u +%T) sm90 $v $case: $(timeout 60 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) Nsight Compute: the dQ pass, H16 top-192, one backward (six groups)" >> "$S"
for v in main new; do
  timeout 90 ncu --metrics gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
    --csv --print-units base -k regex:dq_stored --launch-count 6 ${kbv[$v]} 16 768 192 128 64 0 2 1 > "$OUT/ncu-$v.csv" 2>&1
  echo "ncu $v rc $?" >> "$S"
done
kill $smi 2>/dev/null
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
