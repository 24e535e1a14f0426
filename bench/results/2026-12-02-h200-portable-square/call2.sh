#!/usr/bin/env bash
# Session 18, call 2: the portable key pass with two query stages (the next pair's Q/dO land
# under the whole pair; a CTA barrier less) where they leave two CTAs per SM, and the pair
# barrier before dV/dK of the one-stage kernel over the two warps that share keys (new;
# VSA_BWD_STAGES=1 forces one stage, for this comparison only), against main (86c5117) and
# call 1's commit (ba25176), built beside it. The portable suites with either stage count,
# racecheck of both, memcheck; the kernels alone, alternately; dense FA2's backward.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
for v in main c1; do
  ( cmake -S .gpubin/$v -B /tmp/build-$v -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
      -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/$v-build.log 2>&1 &&
    ninja -C /tmp/build-$v vsa_kernel_bench >> /tmp/$v-build.log 2>&1; echo "$v build rc $?" > /tmp/$v.rc ) &
done
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
grep -A2 'sm8010bwd_kernel' "$OUT/build.log" | grep -E 'spill|Used' | sort | uniq -c >> "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
for st in 2 1; do
  echo "== $(date -u +%T) portable kernels' suites (VSA_CUDA_KERNEL=sm80, VSA_BWD_STAGES=$st)" >> "$S"
  VSA_BWD_STAGES=$st VSA_CUDA_KERNEL=sm80 timeout 300 $t --gtest_brief=1 \
    --gtest_filter='*Backward*:*Sweep*:*Layer*:*Forward*:DqPaths*:*FailedCall*' > "$OUT/tests-sm80-s$st.log" 2>&1
  echo "rc $?" >> "$S"; grep -E "^\[  PASSED|^\[  FAILED|tests ran" "$OUT/tests-sm80-s$st.log" | head -20 >> "$S"
  VSA_BWD_STAGES=$st VSA_CUDA_KERNEL=sm80 timeout 120 compute-sanitizer --tool racecheck --error-exitcode 99 --print-limit 10 $t \
    --gtest_filter='Cases/CudaBackward.*d128*:DqPaths/*' --gtest_brief=1 > "$OUT/racecheck-s$st.log" 2>&1
  echo "racecheck rc $?" >> "$S"; grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$OUT/racecheck-s$st.log" | head -5 >> "$S"
done
VSA_CUDA_KERNEL=sm80 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='Cases/CudaBackward.*d128*:DqPaths/*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?" >> "$S"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
wait; cat /tmp/main.rc /tmp/c1.rc >> "$S"
echo "== $(date -u +%T) A/B, alternately (VSA_CUDA_KERNEL=sm80)" >> "$S"
new=build/gpu/bench/kernel/vsa_kernel_bench
run() {  # variant, case
  local v=$1; shift
  case $v in
    main|c1) r=$(VSA_CUDA_KERNEL=sm80 timeout 60 /tmp/build-$v/bench/kernel/vsa_kernel_bench "$@" 2>&1 | tail -n 1) ;;
    s1) r=$(VSA_BWD_STAGES=1 VSA_CUDA_KERNEL=sm80 timeout 60 $new "$@" 2>&1 | tail -n 1) ;;
    s2) r=$(VSA_CUDA_KERNEL=sm80 timeout 60 $new "$@" 2>&1 | tail -n 1) ;;
  esac
  echo "$v $*: $r" >> "$S"
}
for r in 1 2; do
  for case in "12 624 63 128 64 2 2" "16 768 64 128 64 0 2" "16 384 32 128 128 0 2" "12 624 63 64 64 1 2" "12 624 63 128 64 2 3"; do
    [[ $r == 1 ]] && run main $case
    for v in c1 s1 s2; do run $v $case; done
  done
done
echo "== $(date -u +%T) dense FA2 backward, Wan shape" >> "$S"
timeout 120 python3 bench/results/2026-12-02-h200-portable-bwd/fa2_dense_bwd_time.py >> "$S" 2>&1
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
