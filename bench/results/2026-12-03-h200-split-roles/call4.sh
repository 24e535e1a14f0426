#!/usr/bin/env bash
# Session 22, call 4: the stored key pass's copies issued before its products.
#   main (8c71bea, .gpubin/main);
#   new  (this tree, branch key-pass-copies-first): pair n + 1 is found a pair ahead, and its
#        copies are issued at pair n's start, before Sᵀ and dPᵀ (under them, in call 2's profile,
#        the copies' address registers waited for the previous copy to leave the queue: the
#        span from the products' issue to their wait was 32 % of a warp's samples); pair n + 2
#        is found under the products.
# The C++ GPU suite on new; vsa_kernel_bench alternately, twice; Nsight Compute on the key pass.
# Predicted before the call: key pass −0 to −5 % (Wan, stored dS).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
for v in main; do
  ( cmake -S .gpubin/$v -B /tmp/build-$v -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
      -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/$v-build.log 2>&1 &&
    ninja -C /tmp/build-$v vsa_kernel_bench >> /tmp/$v-build.log 2>&1; echo "$v build rc $?" > /tmp/$v.rc ) &
done
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
grep -A2 'sm9010bwd_kernel' "$OUT/build.log" | grep -E 'Compiling|spill|Used' | sed 's/ptxas info    : //' > "$OUT/ptxas-bwd.txt"
t=build/gpu/tests/cuda/vsa_cuda_tests
echo "== $(date -u +%T) the C++ GPU suite, default kernels" >> "$S"
timeout 240 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1; echo "rc $?" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -30 >> "$S"
wait; cat /tmp/main.rc >> "$S"
declare -A kb=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B: main, new alternately, twice (2: backward, 3: deterministic)" >> "$S"
for r in 1 2; do
  for case in "12 624 63 128 64 2 2" "12 624 63 128 64 3 2" "16 768 64 128 64 0 2" "12 624 63 64 64 3 3" "12 624 63 128 64 2 1"; do
    for v in main new; do
      echo "$v $case: $(timeout 60 ${kb[$v]} $case 2>&1 | tail -n 2 | tr '\n' ' ')" >> "$S"
    done
  done
done
echo "== $(date -u +%T) the Wan backward's key pass (Nsight Compute)" >> "$S"
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
for v in main new; do
  for partial in 2 3; do
    timeout 60 ncu --clock-control none -k "regex:^bwd_kernel" --launch-skip 2 --launch-count 1 --metrics $M \
      ${kb[$v]} 12 624 63 128 64 $partial 2 2>&1 | grep -E "^  [a-z_ ].*bwd_|gpu__|smsp__|sm__" | sed "s/^/$v p$partial /" >> "$S"
  done
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
