#!/usr/bin/env bash
# Session 22, call 6: the stored key pass's full query tiles copied by TMA.
#   main (8c71bea, .gpubin/main); new (this tree, branch key-pass-tma-copies): a full query
#   tile's Q and dO come by TMA (one thread's request on the stage's mbarrier), partial tiles and
#   every pair's lse and delta still by cp.async; the 206 instructions a warp spent per pair on
#   the list walk and copies (call 2's profile) lose the copies' address arithmetic.
# Short for the device time left: the C++ GPU suite on new, then vsa_kernel_bench alternately once.
# Predicted before the call: key pass −3 to −8 % without query padding (every tile by TMA), less
# with it.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary-main.txt"
{ echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "commit: $COMMIT"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } > "$S"
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
cmake -B build/gpu -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest \
  > "$OUT/build.log" 2>&1 && ninja -C build/gpu vsa_cuda_tests vsa_kernel_bench >> "$OUT/build.log" 2>&1
echo "new build rc $? ($((SECONDS - start)) s)" >> "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
kb=build/gpu/bench/kernel/vsa_kernel_bench
echo "smoke: $(timeout 20 $kb 12 624 63 128 64 2 2 2>&1 | tail -n 1)" >> "$S"
timeout 100 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1; echo "suite rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -20 >> "$S"
wait; cat /tmp/main.rc >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=$kb)
for case in "12 624 63 128 64 2 2" "12 624 63 128 64 3 2" "16 768 64 128 64 0 2" "12 624 63 128 64 2 2"; do
  for v in main new; do
    echo "$v $case: $(timeout 30 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
  done
done
echo "done ($((SECONDS - start)) s)" >> "$S"
