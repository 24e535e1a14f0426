#!/usr/bin/env bash
# Session 20, call 4: main after one class took over both dQ passes' query tile and stored-tile
# lookup (the Hopper pass's SASS unchanged, the portable one's instructions reordered), against
# the commit before it (built beside it from .gpubin/main). The backward suites on both kernel
# families, memcheck of the portable dQ pass, vsa_kernel_bench alternately, twice.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
grep -c 'serialized' "$OUT/build.log" >> "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
echo "== $(date -u +%T) backward suites, default kernels and portable kernels" >> "$S"
timeout 150 $t --gtest_brief=1 --gtest_filter='*Backward*:*Sweep*:DqPaths*:*Layer*' > "$OUT/tests.log" 2>&1
echo "rc $?" >> "$S"; grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -10 >> "$S"
VSA_CUDA_KERNEL=sm80 timeout 150 $t --gtest_brief=1 --gtest_filter='*Backward*:*Sweep*:DqPaths*:*Layer*' > "$OUT/tests-sm80.log" 2>&1
echo "sm80 rc $?" >> "$S"; grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-sm80.log" | head -10 >> "$S"
VSA_CUDA_KERNEL=sm80 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='DqPaths/CudaBackwardEdges.*/1:CudaBackwardStoredDs.*:DimsAndBlocks/CudaBackwardPartialBlocks.*' \
  --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "sm80 memcheck rc $?" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
wait; cat /tmp/main.rc >> "$S"
echo "== $(date -u +%T) A/B: before, after alternately, twice (3: deterministic)" >> "$S"
declare -A kb=([before]=/tmp/build-main/bench/kernel/vsa_kernel_bench [after]=build/gpu/bench/kernel/vsa_kernel_bench)
for r in 1 2; do
  for case in "sm80 12 624 63 128 64 2 3" "sm90 12 624 63 128 64 2 2"; do
    for v in before after; do
      set -- $case
      echo "$v $case: $(VSA_CUDA_KERNEL=$1 timeout 60 ${kb[$v]} ${case#* } 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
