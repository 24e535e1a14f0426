#!/usr/bin/env bash
# Session 19, call 1: the portable key pass with dQ one 16-row tile at a time and K fragments held
# in registers (branch dq-row-tiles, new) against main (f23ffe5, built beside it from .gpubin/main). The
# suites, racecheck and memcheck of the portable backward; the kernels alone
# (vsa_kernel_bench), main and new alternately, twice; dense FA2's backward on the Wan shape;
# instructions, shared-memory wavefronts and tensor-pipe activity of one key-pass launch of each.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
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
  echo "$tool rc $?" >> "$S"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests ran|PASSED|FAILED" "$OUT/$tool.log" | head -5 >> "$S"
done
wait; cat /tmp/main.rc >> "$S"; tail -n 3 /tmp/main-build.log >> "$S"
echo "== $(date -u +%T) A/B: main, new alternately, twice (VSA_CUDA_KERNEL=sm80)" >> "$S"
declare -A kb=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
for r in 1 2; do
  for case in "12 624 63 128 64 2 2" "16 768 64 128 64 0 2" "16 384 32 128 128 0 2" "12 624 63 64 64 1 2" "12 624 63 128 64 2 3"; do
    for v in main new; do
      echo "$v sm80 $case: $(VSA_CUDA_KERNEL=sm80 timeout 60 ${kb[$v]} $case 2>&1 | tail -n 2 | tr '\n' ' ')" >> "$S"
    done
  done
done
echo "== $(date -u +%T) dense FA2 backward, Wan shape" >> "$S"
timeout 120 python3 bench/results/2026-12-02-h200-portable-bwd/fa2_dense_bwd_time.py >> "$S" 2>&1
echo "== $(date -u +%T) one launch of the portable key pass, Wan shape (Nsight Compute)" >> "$S"
for v in main new; do
  VSA_CUDA_KERNEL=sm80 timeout 100 ncu --clock-control none -k "regex:^bwd_kernel" --launch-skip 2 --launch-count 1 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_barrier.ratio,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.avg.per_cycle_active \
    ${kb[$v]} 12 624 63 128 64 2 2 2>&1 | grep -E "gpu__|smsp__|l1tex__|sm__" | sed "s/^/$v /" >> "$S"
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
