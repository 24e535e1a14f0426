#!/usr/bin/env bash
# Session 21, call 2: three trees, vsa_kernel_bench alternately, twice:
#   main (5889704, .gpubin/main);
#   mid  (3f2a7b1, .gpubin/mid): call 1's branch with forward v2 reverted to main's, the Hopper
#        key pass storing no dSᵀ rows for warps of padding keys only, the portable dQ pass
#        reading real keys' rows only, the backward tests' workspace filled with 0xFF;
#   new  (this tree): also the next pair's real query rows from a count read a pair ahead.
# The C++ GPU suite (default kernels, Hopper atomic dq, portable backward) on the new tree;
# Nsight Compute on the Wan backward's two passes, with and without query padding.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
for v in main mid; do
  ( cmake -S .gpubin/$v -B /tmp/build-$v -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
      -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/$v-build.log 2>&1 &&
    ninja -C /tmp/build-$v vsa_kernel_bench >> /tmp/$v-build.log 2>&1; echo "$v build rc $?" > /tmp/$v.rc ) &
done
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
grep -A2 'sm9010bwd_kernel\|bwd_dq_stored_kernel\|sm8010bwd_kernel' "$OUT/build.log" | grep -E 'Compiling|spill|Used' | sed 's/ptxas info    : //' > "$OUT/ptxas-bwd.txt"
t=build/gpu/tests/cuda/vsa_cuda_tests
echo "== $(date -u +%T) the C++ GPU suite, default kernels" >> "$S"
timeout 240 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1; echo "rc $?" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -20 >> "$S"
echo "== $(date -u +%T) backward suites, Hopper atomic dq (VSA_CUDA_DQ=atomic)" >> "$S"
VSA_CUDA_DQ=atomic timeout 200 $t --gtest_brief=1 --gtest_filter='*CudaBackward*:CudaSweep.Backward*' > "$OUT/tests-atomic.log" 2>&1
echo "rc $?" >> "$S"; grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-atomic.log" | head -20 >> "$S"
echo "== $(date -u +%T) portable kernels' backward suites (VSA_CUDA_KERNEL=sm80)" >> "$S"
VSA_CUDA_KERNEL=sm80 timeout 200 $t --gtest_brief=1 --gtest_filter='*CudaBackward*:CudaSweep.Backward*:*PartialBlocks*' \
  > "$OUT/tests-sm80.log" 2>&1; echo "rc $?" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-sm80.log" | head -20 >> "$S"
wait; cat /tmp/main.rc /tmp/mid.rc >> "$S"
declare -A kb=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [mid]=/tmp/build-mid/bench/kernel/vsa_kernel_bench
               [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B/C: main, mid, new alternately, twice (2: backward, 3: deterministic)" >> "$S"
for r in 1 2; do
  for case in "sm90 12 624 63 128 64 2 2" "sm90 12 624 63 128 64 3 2" "sm90 16 768 64 128 64 0 2" \
              "sm90 12 624 63 64 64 3 2" "sm80 12 624 63 128 64 2 2" "sm80 12 624 63 128 64 3 3"; do
    for v in main mid new; do
      set -- $case
      echo "$v $case: $(VSA_CUDA_KERNEL=$1 timeout 60 ${kb[$v]} ${case#* } 2>&1 | tail -n 2 | tr '\n' ' ')" >> "$S"
    done
  done
done
echo "== $(date -u +%T) the Wan backward's passes (Nsight Compute)" >> "$S"
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_write.sum
for v in main mid new; do
  for partial in 2 3; do
    timeout 60 ncu --clock-control none -k "regex:^bwd_" --launch-skip 4 --launch-count 2 --metrics $M \
      ${kb[$v]} 12 624 63 128 64 $partial 2 2>&1 | grep -E "^  [a-z_ ].*bwd_|gpu__|smsp__|sm__|dram__" | sed "s/^/$v p$partial /" >> "$S"
  done
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
