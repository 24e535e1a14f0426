#!/usr/bin/env bash
# Session 25, call 4 (the session's last ~430 device seconds): branch key-pass-list-smem (main +
# the list entry after next read through shared memory) against main (.gpubin/main) built beside
# it. The C++ GPU backward tests (every CudaBackward suite, DqMethod, the backward sweep) and
# memcheck of the partial-block / query-padding backward on the branch; the A/B with the host
# ahead (8 calls a timing), main and new in turn, two rounds, Wan tiling without and with query
# padding and H16. Each line is written as it comes, so a cut call still reports.
# Predicted before the call: −0.5 to −3 % on every case.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
timeout 80 $t --gtest_brief=1 --gtest_filter='*CudaBackward*:*DqMethod*:CudaSweep.Backward*' > "$OUT/tests.log" 2>&1
echo "backward tests rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -20 >> "$S"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='DimsAndBlocks/CudaBackwardPartialBlocks.*/0:*QueryPadding*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
wait; cat /tmp/main.rc >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B, 8 calls a timing: main, new in turn, two rounds" >> "$S"
for r in 1 2; do
  for case in "12 624 63 128 64 2 2 8" "12 624 63 128 64 3 2 8" "16 768 64 128 64 0 2 8"; do
    for v in main new; do
      echo "$v $case: $(timeout 40 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
