#!/usr/bin/env bash
# Session 22, call 1: the split-role key pass (branch key-pass-split-roles) against main.
#   main (8c71bea, .gpubin/main); new (this tree).
# The C++ GPU suite on the new tree (its stored-dS key pass is the split-role kernel at D = 128,
# and at D = 64 when deterministic); vsa_kernel_bench alternately, twice; Nsight Compute on the
# Wan backward's key pass (time, occupancy limits, tensor pipe, instructions).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
grep -A2 'bwd_split_kernel\|sm9010bwd_kernel' "$OUT/build.log" | grep -E 'Compiling|spill|Used' | sed 's/ptxas info    : //' > "$OUT/ptxas-bwd.txt"
t=build/gpu/tests/cuda/vsa_cuda_tests
kb=build/gpu/bench/kernel/vsa_kernel_bench
echo "== $(date -u +%T) smoke: Wan backward once" >> "$S"
timeout 60 $kb 12 624 63 128 64 2 2 2>&1 | tail -n 3 >> "$S"
echo "== $(date -u +%T) the C++ GPU suite, default kernels" >> "$S"
timeout 240 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1; echo "rc $?" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -30 >> "$S"
wait; cat /tmp/main.rc >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=$kb)
echo "== $(date -u +%T) A/B: main, new alternately, twice (2: backward, 3: deterministic)" >> "$S"
for r in 1 2; do
  for case in "12 624 63 128 64 2 2" "12 624 63 128 64 3 2" "16 768 64 128 64 0 2" "12 624 63 64 64 3 3"; do
    for v in main new; do
      echo "$v $case: $(timeout 60 ${kbv[$v]} $case 2>&1 | tail -n 2 | tr '\n' ' ')" >> "$S"
    done
  done
done
echo "== $(date -u +%T) the Wan backward's key pass (Nsight Compute)" >> "$S"
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
for v in main new; do
  for partial in 2 3; do
    timeout 60 ncu --clock-control none -k "regex:^bwd_(split_)?kernel" --launch-skip 2 --launch-count 1 --metrics $M \
      ${kbv[$v]} 12 624 63 128 64 $partial 2 2>&1 | grep -E "^  [a-z_ ].*bwd_|gpu__|smsp__|sm__|launch__" | sed "s/^/$v p$partial /" >> "$S"
  done
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
