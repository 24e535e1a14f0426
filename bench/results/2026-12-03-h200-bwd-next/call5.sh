#!/usr/bin/env bash
# Session 24, call 5 (the session's last ~240 device seconds): branch key-pass-k-registers (main
# 74412ff + K as the register operand of Sᵀ in the stored key pass) against main (.gpubin/base).
# The C++ GPU backward tests (CudaBackward*, the sweep, the stored-dS cases), then the A/B with
# the host ahead, Wan tiling, main and new in turn, as many rounds as the time allows.
# Predicted before the call: key pass −1 to −2 %.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary-main.txt"
( cmake -S .gpubin/base -B /tmp/build-base -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/base-build.log 2>&1 &&
  ninja -C /tmp/build-base vsa_kernel_bench >> /tmp/base-build.log 2>&1; echo "base build rc $?" > /tmp/base.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp > /dev/null 2>&1
cp "$OUT/summary.txt" "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
timeout 60 $t --gtest_brief=1 --gtest_filter='*CudaBackward*:*DqMethod*' > "$OUT/tests.log" 2>&1
echo "backward tests rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -20 >> "$S"
wait; cat /tmp/base.rc >> "$S"
declare -A kbv=([base]=/tmp/build-base/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B, 8 calls a timing: base, new in turn" >> "$S"
for r in 1 2 3; do
  for case in "12 624 63 128 64 2 2 8" "12 624 63 128 64 3 2 8"; do
    for v in base new; do
      echo "$v $case: $(timeout 30 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
