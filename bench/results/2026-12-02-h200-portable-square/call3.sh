#!/usr/bin/env bash
# Session 18, call 3: the tree that lands: one query stage with dQ (call 2's one-stage kernel,
# instruction for instruction), two without it (the deterministic path), whose barrier before
# dV and dK now covers only the two warps that share keys. The portable suites, racecheck and
# memcheck; the kernels alone against call 1's commit (ba25176), alternately, twice.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
( cmake -S .gpubin/c1 -B /tmp/build-c1 -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/c1-build.log 2>&1 &&
  ninja -C /tmp/build-c1 vsa_kernel_bench >> /tmp/c1-build.log 2>&1; echo "c1 build rc $?" > /tmp/c1.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
grep -A2 'sm8010bwd_kernel' "$OUT/build.log" | grep -E 'spill|Used' | sort | uniq -c >> "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
echo "== $(date -u +%T) portable kernels' suites (VSA_CUDA_KERNEL=sm80)" >> "$S"
VSA_CUDA_KERNEL=sm80 timeout 300 $t --gtest_brief=1 --gtest_filter='*Backward*:*Sweep*:*Layer*:*Forward*:DqPaths*:*FailedCall*' \
  > "$OUT/tests-sm80.log" 2>&1; echo "rc $?" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran" "$OUT/tests-sm80.log" | head -20 >> "$S"
for tool in racecheck memcheck; do
  VSA_CUDA_KERNEL=sm80 timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 10 $t \
    --gtest_filter='Cases/CudaBackward.*d128*:DqPaths/*' --gtest_brief=1 > "$OUT/$tool.log" 2>&1
  echo "$tool rc $?" >> "$S"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$tool.log" | head -5 >> "$S"
done
wait; cat /tmp/c1.rc >> "$S"
echo "== $(date -u +%T) A/B: call 1's commit, new alternately, twice (VSA_CUDA_KERNEL=sm80)" >> "$S"
declare -A kb=([c1]=/tmp/build-c1/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
for r in 1 2; do
  for case in "12 624 63 128 64 2 2" "16 768 64 128 64 0 2" "16 384 32 128 128 0 2" "12 624 63 64 64 1 2" "12 624 63 128 64 2 3" "12 624 63 64 64 1 3"; do
    for v in c1 new; do
      echo "$v sm80 $case: $(VSA_CUDA_KERNEL=sm80 timeout 60 ${kb[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
