#!/usr/bin/env bash
# Session 16, call 1: the warp-specialized key pass (VSA_CUDA_KEY_PASS=ws) against the
# one-warpgroup key pass (default), one build. Correctness first: the backward suites, the
# sweep and the refusals on ws, the kernel-choice tests; compute-sanitizer on ws if they pass;
# then the backward alone (vsa_kernel_bench ... 2 and ... 3) for both, alternately, twice.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
kb=build/gpu/bench/kernel/vsa_kernel_bench
echo "== $(date -u +%T) KernelChoice" >> "$S"
timeout 30 $t --gtest_filter='KernelChoice*' 2>&1 | grep -E "PASSED|FAILED" >> "$S"
echo "== $(date -u +%T) backward suites on ws" >> "$S"
VSA_CUDA_KEY_PASS=ws timeout 200 $t --gtest_filter='*CudaBackward*:CudaSweep.*Backward*:CudaFailedCall*' > "$OUT/ws-tests.log" 2>&1
rc=$?; echo "rc $rc" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran" "$OUT/ws-tests.log" | head -30 >> "$S"
if [[ $rc == 0 ]]; then
  for tool in racecheck synccheck memcheck; do
    VSA_CUDA_KEY_PASS=ws timeout 100 compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 10 $t \
      --gtest_filter='Cases/CudaBackward.*d128*:DqPaths/*' --gtest_brief=1 > "$OUT/ws-$tool.log" 2>&1
    echo "$tool rc $?" >> "$S"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests ran|PASSED|FAILED" "$OUT/ws-$tool.log" | head -5 >> "$S"
  done
fi
echo "== $(date -u +%T) A/B backward: default (wg) and ws, alternately" >> "$S"
for r in 1 2; do
  for shape in "12 624 63 128 64 2" "16 768 64 128 64 0" "16 384 32 128 128 0" "12 624 63 64 64 1"; do
    for kp in wg ws; do
      echo "$kp $shape: $(VSA_CUDA_KEY_PASS=$kp timeout 60 $kb $shape 2 2>&1 | tail -n 2 | tr '\n' ' ')" >> "$S"
    done
  done
done
for kp in wg ws; do
  echo "$kp deterministic Wan: $(VSA_CUDA_KEY_PASS=$kp timeout 60 $kb 12 624 63 128 64 2 3 2>&1 | tail -n 2 | tr '\n' ' ')" >> "$S"
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
