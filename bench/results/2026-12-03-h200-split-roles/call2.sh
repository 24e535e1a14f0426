#!/usr/bin/env bash
# Session 22, call 2: where main's stored-dS key pass waits, and one variant.
#   main (8c71bea, .gpubin/main); mid (.gpubin/mid, branch key-pass-late-copies: the next pair's
#   copies issued after the Sᵀ/dPᵀ wait instead of under those products, whose operands both
#   come from shared memory).
# vsa_kernel_bench alternately, twice; Nsight Compute: main's key pass in full (every section,
# stall samples per SASS line), mid's key pass time and shared-memory metrics beside main's.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary-main.txt"
{ echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "commit: $COMMIT"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } > "$S"
for v in main mid; do
  ( cmake -S .gpubin/$v -B /tmp/build-$v -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
      -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/$v-build.log 2>&1 &&
    ninja -C /tmp/build-$v vsa_kernel_bench >> /tmp/$v-build.log 2>&1; echo "$v build rc $?" > /tmp/$v.rc ) &
done
wait; cat /tmp/main.rc /tmp/mid.rc >> "$S"
declare -A kb=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [mid]=/tmp/build-mid/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B: main, mid alternately, twice (2: backward, 3: deterministic)" >> "$S"
for r in 1 2; do
  for case in "12 624 63 128 64 2 2" "12 624 63 128 64 3 2" "16 768 64 128 64 0 2"; do
    for v in main mid; do
      echo "$v $case: $(timeout 60 ${kb[$v]} $case 2>&1 | tail -n 2 | tr '\n' ' ')" >> "$S"
    done
  done
done
echo "== $(date -u +%T) key pass metrics (Nsight Compute)" >> "$S"
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__cycles_active.avg
for v in main mid; do
  timeout 60 ncu --clock-control none -k "regex:^bwd_kernel" --launch-skip 2 --launch-count 1 --metrics $M \
    ${kb[$v]} 12 624 63 128 64 2 2 2>&1 | grep -E "^  [a-z_ ].*bwd_|gpu__|smsp__|sm__|l1tex__" | sed "s/^/$v /" >> "$S"
done
echo "== $(date -u +%T) main's key pass in full" >> "$S"
timeout 200 ncu --clock-control none -k "regex:^bwd_kernel" --launch-skip 2 --launch-count 1 --set full \
  --import-source yes -o "$OUT/bwd" ${kb[main]} 12 624 63 128 64 2 2 > "$OUT/profile.log" 2>&1
ncu --import "$OUT/bwd.ncu-rep" --page details >> "$OUT/profile.log" 2>&1
ncu --import "$OUT/bwd.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip > "$OUT/bwd-sass.csv.gz"
rm -f "$OUT/bwd.ncu-rep"
grep -E "Duration|Throughput|Pipe|Issue|Stall|Warp Cycles|Eligible|Active Warps|Shared" "$OUT/profile.log" | head -60 >> "$S"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
