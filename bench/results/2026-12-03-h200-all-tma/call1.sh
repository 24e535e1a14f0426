#!/usr/bin/env bash
# Session 23, call 1: every pair of the stored key pass by TMA (branch key-pass-all-tma) against
# main (22c67fc, .gpubin/main), whose TMA covered a full query tile's Q and dO only.
#   new: one thread requests each pair's Q and dO (a partial query tile in 8-row boxes over its
#   real rows, through a second pair of maps), and its lse and delta by two bulk copies, on the
#   stage's mbarrier; the other threads compute no copy address at all (main: every thread
#   computed the pair's row pointers and 32 of them copied the lse and delta; partial tiles, 27 %
#   of Wan's with query padding, went wholly by cp.async).
# The C++ GPU suite and memcheck on new; vsa_kernel_bench main and new alternately, twice; Nsight
# Compute on the key pass (time, instructions, tensor pipe); the backward's launches on the
# device clock (timeline.py, after the Python package's build).
# Predicted before the call: Wan −0.5 to −1.5 %, Wan with query padding −1.5 to −3 %, H16 −0.5
# to −1.5 %; key-pass instructions −3 to −6 %.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
D=bench/results/2026-12-03-h200-all-tma
S="$OUT/summary-main.txt"
{ echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "commit: $COMMIT"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } > "$S"
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
cmake -B build/gpu -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest \
  -DVSA_PTXAS_VERBOSE=ON > "$OUT/build.log" 2>&1 && ninja -C build/gpu vsa_cuda_tests vsa_kernel_bench >> "$OUT/build.log" 2>&1
echo "new build rc $? ($((SECONDS - start)) s)" >> "$S"
grep -A2 'sm9010bwd_kernel' "$OUT/build.log" | grep -E 'Compiling|spill|Used' | sed 's/ptxas info    : //' > "$OUT/ptxas-bwd.txt"
t=build/gpu/tests/cuda/vsa_cuda_tests
kb=build/gpu/bench/kernel/vsa_kernel_bench
echo "smoke: $(timeout 20 $kb 12 624 63 128 64 3 2 2>&1 | tail -n 1)" >> "$S"
timeout 120 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1; echo "suite rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -20 >> "$S"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='DimsAndBlocks/CudaBackwardPartialBlocks.*/0:DimsAndBlocks/CudaBackwardPartialBlocks.*/1:*QueryPadding*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $? ($((SECONDS - start)) s)" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
wait; cat /tmp/main.rc >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=$kb)
echo "== $(date -u +%T) A/B: main, new alternately, twice" >> "$S"
for r in 1 2; do
  for case in "12 624 63 128 64 2 2" "12 624 63 128 64 3 2" "16 768 64 128 64 0 2" "12 624 63 64 64 3 2"; do
    for v in main new; do
      echo "$v $case: $(timeout 30 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) the Wan backward's key pass (Nsight Compute)" >> "$S"
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
for v in main new; do
  for partial in 2 3; do
    timeout 60 ncu --clock-control none -k "regex:^bwd_kernel" --launch-skip 2 --launch-count 1 --metrics $M \
      ${kbv[$v]} 12 624 63 128 64 $partial 2 2>&1 | grep -E "gpu__|smsp__|sm__" | sed "s/^/$v p$partial /" >> "$S"
  done
done
echo "== $(date -u +%T) Python package and the backward's timeline (new)" >> "$S"
VSA_COMMIT=$COMMIT bash scripts/gpu.sh python > /dev/null 2>&1; tail -n 3 "$OUT/summary.txt" >> "$S"
for f in "" --q-padding; do timeout 60 python3 $D/timeline.py $f >> "$OUT/timeline.log" 2>&1; done
grep -E "span|sum of" "$OUT/timeline.log" >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
