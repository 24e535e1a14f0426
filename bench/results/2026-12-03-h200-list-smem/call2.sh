#!/usr/bin/env bash
# Session 26, call 2: branch key-pass-spread-issue (2224bb9: the next pair's TMA requests a box
# a warp, the stats copies on warp 3) against main (a14367d, .gpubin/main) and against the same
# change with the list entry through shared memory (.gpubin/both), built beside it. The C++ GPU
# backward tests and memcheck / racecheck of the partial-block and query-padding backward on the
# branch; the A/B with the host ahead (8 calls a timing), main, new and both in turn, two
# rounds, Wan tiling without and with query padding and H16; the branch's key pass profiled
# (Wan tiling); then vsa bench's backward cases beside FastVideo on the branch.
# Predicted before the call: −1 to −4 % on every case.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
for v in main both; do
  ( cmake -S .gpubin/$v -B /tmp/build-$v -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
      -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/$v-build.log 2>&1 &&
    ninja -C /tmp/build-$v vsa_kernel_bench >> /tmp/$v-build.log 2>&1; echo "$v build rc $?" > /tmp/$v.rc ) &
done
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
timeout 120 $t --gtest_brief=1 --gtest_filter='*CudaBackward*:*DqMethod*:CudaSweep.Backward*' > "$OUT/tests.log" 2>&1
echo "backward tests rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -20 >> "$S"
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 10 $t \
    --gtest_filter='DimsAndBlocks/CudaBackwardPartialBlocks.*/0:*QueryPadding*' --gtest_brief=1 > "$OUT/$tool.log" 2>&1
  echo "$tool rc $? ($((SECONDS - start)) s)" >> "$S"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests ran|PASSED|FAILED" "$OUT/$tool.log" | head -5 >> "$S"
done
wait; cat /tmp/main.rc /tmp/both.rc >> "$S"; tail -n 1 /tmp/tk-build.log >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench
                [both]=/tmp/build-both/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B, 8 calls a timing: main, new, both in turn, two rounds" >> "$S"
for r in 1 2; do
  for case in "12 624 63 128 64 2 2 8" "12 624 63 128 64 3 2 8" "16 768 64 128 64 0 2 8"; do
    for v in main new both; do
      echo "$v $case: $(timeout 40 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) the branch's key pass (Wan tiling)" >> "$S"
kb=build/gpu/bench/kernel/vsa_kernel_bench
timeout 60 ncu --clock-control none -k "regex:^bwd_kernel" --launch-skip 2 --launch-count 1 --set full \
  --import-source yes -o "$OUT/bwd" $kb 12 624 63 128 64 2 2 > "$OUT/profile.log" 2>&1
ncu --import "$OUT/bwd.ncu-rep" --page details >> "$OUT/profile.log" 2>&1
ncu --import "$OUT/bwd.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip > "$OUT/bwd-sass.csv.gz"
rm -f "$OUT/bwd.ncu-rep" "$OUT/build.log"
grep -E "Duration|Issue Slots|Elapsed Cycles|SM Frequency|Issued Instructions  " "$OUT/profile.log" | head -8 >> "$S"
echo "== $(date -u +%T) vsa bench attention, forward and backward, with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 200 vsa bench --case wan2.1-1.3b-480p --case synthetic-49k --case synthetic-b2-16k \
  --case synthetic-49k-top192 --backends vsa,fastvideo-tk,fastvideo-triton --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -40 >> "$S"
rm -rf "$OUT/attention"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
