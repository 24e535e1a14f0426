#!/usr/bin/env bash
# Session 17, call 4: the tree that lands (its portable kernels are call 2's instruction for
# instruction, its Hopper kernels main's): the portable kernels' suites, then main and new
# alternately once on the portable backward's shapes, and dense FA2's backward on the Wan shape.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
echo "== $(date -u +%T) portable kernels' suites (VSA_CUDA_KERNEL=sm80)" >> "$S"
VSA_CUDA_KERNEL=sm80 timeout 300 $t --gtest_brief=1 --gtest_filter='*Backward*:*Sweep*:*Layer*:*Forward*:DqPaths*:*FailedCall*' \
  > "$OUT/tests-sm80.log" 2>&1; echo "rc $?" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran" "$OUT/tests-sm80.log" | head -20 >> "$S"
wait; cat /tmp/main.rc >> "$S"
echo "== $(date -u +%T) A/B: main, new alternately" >> "$S"
declare -A kb=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
for case in "12 624 63 128 64 2 2" "16 768 64 128 64 0 2" "16 384 32 128 128 0 2" "12 624 63 64 64 1 2" "12 624 63 128 64 2 3"; do
  for v in main new; do
    echo "$v sm80 $case: $(VSA_CUDA_KERNEL=sm80 timeout 60 ${kb[$v]} $case 2>&1 | tail -n 2 | tr '\n' ' ')" >> "$S"
  done
done
echo "== $(date -u +%T) dense FA2 backward, Wan shape" >> "$S"
timeout 120 python3 bench/results/2026-12-02-h200-portable-bwd/fa2_dense_bwd_time.py >> "$S" 2>&1
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
