#!/usr/bin/env bash
# Session 19, call 2: the stored-dS path (the Hopper key pass stores each pair's dSᵀ tile, a dQ
# pass sums dS·K from them; the Hopper kernels' deterministic dq) against main (8e0aff7, built
# beside it from .gpubin/main, whose deterministic path recomputes S and dP in its dQ pass).
# The whole C++ GPU suite on the default (Hopper) kernels; memcheck of the stored path;
# vsa_kernel_bench main and new alternately (atomic once, deterministic on four shapes);
# Nsight Compute on one deterministic backward of the new tree (its key pass and dQ pass).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
grep -A2 'bwd_dq_stored_kernel\|sm9010bwd_kernel' "$OUT/build.log" | grep -E 'Compiling|spill|Used' | sed 's/ptxas info    : //' >> "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
echo "== $(date -u +%T) the C++ GPU suite, default kernels" >> "$S"
timeout 240 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1; echo "rc $?" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure|error" "$OUT/tests.log" | head -20 >> "$S"
echo "== $(date -u +%T) memcheck of the stored-dS path" >> "$S"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='Cases/CudaBackward.*d128*dq_pass*:DqPaths/CudaBackwardEdges.*/1:CudaBackwardStoredDs.*' \
  --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
wait; cat /tmp/main.rc >> "$S"; tail -n 1 /tmp/main-build.log >> "$S"
echo "== $(date -u +%T) A/B: main, new alternately (only 2: atomic dq, 3: deterministic)" >> "$S"
declare -A kb=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
for case in "12 624 63 128 64 2 3" "12 624 63 128 64 2 2" "16 768 64 128 64 0 3" "16 384 32 128 128 0 3" \
            "12 624 63 64 64 1 3" "12 624 63 128 64 2 3"; do
  for v in main new; do
    echo "$v $case: $(timeout 60 ${kb[$v]} $case 2>&1 | tail -n 2 | tr '\n' ' ')" >> "$S"
  done
done
echo "== $(date -u +%T) one deterministic backward of the new tree, Wan shape (Nsight Compute)" >> "$S"
timeout 100 ncu --clock-control none -k "regex:^bwd_" --launch-skip 4 --launch-count 2 \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__xbar2lts_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__lts2xbar_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
  ${kb[new]} 12 624 63 128 64 2 3 > "$OUT/ncu.log" 2>&1
grep -E "bwd_|gpu__|dram__|lts__|sm__|smsp__" "$OUT/ncu.log" | sed 's/ (.*//' >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
