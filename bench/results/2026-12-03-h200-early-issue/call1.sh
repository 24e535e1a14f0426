#!/usr/bin/env bash
# Session 21, call 1: branch key-pass-early-issue (the next pair's / tile's list lookups and
# copies issued under the current product: Hopper key pass, dQ pass, forward v2; the key passes'
# list entries read a pair ahead, portable one too) against main
# (5889704, built beside it from .gpubin/main). The C++ GPU suite on the default kernels and on
# the atomic dq path; vsa_kernel_bench main and new alternately, twice; Nsight Compute on every
# kernel of one Wan backward (main, new) and on the forward; SM clock and power during a bench.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
grep -A2 'sm9010bwd_kernel\|bwd_dq_stored_kernel\|fwd_tma_kernel' "$OUT/build.log" | grep -E 'Compiling|spill|Used' | sed 's/ptxas info    : //' > "$OUT/ptxas-sm90.txt"
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
wait; cat /tmp/main.rc >> "$S"; tail -n 1 /tmp/main-build.log >> "$S"
declare -A kb=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) SM clock, power and throttle reasons during one Wan backward bench (new)" >> "$S"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 200 > "$OUT/clocks.log" 2>&1 &
smi=$!
sleep 0.5; timeout 60 ${kb[new]} 12 624 63 128 64 2 2 >> "$S" 2>&1; sleep 0.3; kill $smi
sort "$OUT/clocks.log" | uniq -c | sort -rn | head -8 >> "$S"
echo "== $(date -u +%T) A/B: main, new alternately, twice (only 1: forward, 2: backward)" >> "$S"
for r in 1 2; do
  for case in "sm90 12 624 63 128 64 2 1" "sm90 16 768 64 128 64 0 1" "sm90 12 624 63 64 64 2 1" \
              "sm90 12 624 63 128 64 2 2" "sm90 12 624 63 128 64 3 2" "sm90 16 768 64 128 64 0 2" \
              "sm90 12 624 63 64 64 3 2" "sm80 12 624 63 128 64 2 2"; do
    for v in main new; do
      set -- $case
      echo "$v $case: $(VSA_CUDA_KERNEL=$1 timeout 60 ${kb[$v]} ${case#* } 2>&1 | tail -n 2 | tr '\n' ' ')" >> "$S"
    done
  done
done
echo "== $(date -u +%T) every kernel of one Wan backward, and the forward (Nsight Compute)" >> "$S"
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors.avg.pct_of_peak_sustained_elapsed
for v in main new; do
  timeout 90 ncu --clock-control none --cache-control none --launch-skip 30 --launch-count 12 --metrics gpu__time_duration.sum \
    ${kb[$v]} 12 624 63 128 64 2 2 2>&1 | grep -E "^  [a-z_].*\(|gpu__" | sed "s/^/$v /" >> "$S"
  timeout 60 ncu --clock-control none -k "regex:^fwd_tma" --launch-skip 2 --launch-count 1 --metrics $M \
    ${kb[$v]} 12 624 63 128 64 2 1 2>&1 | grep -E "gpu__|smsp__|sm__|lts__" | sed "s/^/$v fwd /" >> "$S"
  timeout 60 ncu --clock-control none -k "regex:^bwd_" --launch-skip 4 --launch-count 2 --metrics $M \
    ${kb[$v]} 12 624 63 128 64 3 2 2>&1 | grep -E "bwd_|gpu__|smsp__|sm__|lts__" | sed "s/^/$v bwd q-padded /" >> "$S"
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
