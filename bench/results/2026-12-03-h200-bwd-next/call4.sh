#!/usr/bin/env bash
# Session 24, call 4: branch tma-pairs-no-fence (ds-fragments + no proxy fence at a pair whose Q
# and dO came by TMA). ds-fragments' vsa_kernel_bench built beside it (.gpubin/base). The C++ GPU
# suite and memcheck of the partial-block / query-padding backward; the A/B with the host ahead.
# Predicted before the call: −0.5 to −2 % on the Wan tiling, less with query padding.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
( cmake -S .gpubin/base -B /tmp/build-base -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/base-build.log 2>&1 &&
  ninja -C /tmp/build-base vsa_kernel_bench >> /tmp/base-build.log 2>&1; echo "base build rc $?" > /tmp/base.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
timeout 150 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1; echo "suite rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -20 >> "$S"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='DimsAndBlocks/CudaBackwardPartialBlocks.*/0:DimsAndBlocks/CudaBackwardPartialBlocks.*/1:*QueryPadding*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
wait; cat /tmp/base.rc >> "$S"
declare -A kbv=([base]=/tmp/build-base/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B, 8 calls a timing: base, new in turn, twice" >> "$S"
for r in 1 2; do
  for case in "12 624 63 128 64 2 2 8" "12 624 63 128 64 3 2 8" "16 768 64 128 64 0 2 8"; do
    for v in base new; do
      echo "$v $case: $(timeout 40 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
