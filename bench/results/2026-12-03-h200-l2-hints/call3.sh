#!/usr/bin/env bash
# Session 27, call 3: branch portable-list-smem (03518cc: the portable atomic key pass's list entry
# after next through shared memory; every Hopper kernel main's SASS) against main (b5d2c2c, with
# the stored dS tiles' evict-first stores; .gpubin/main), built beside it. The portable kernels'
# backward and layer suites (VSA_CUDA_KERNEL=sm80) and memcheck of the portable partial-block and
# query-padding backward on the branch; the portable A/B with the host ahead (8 calls a timing),
# main and new in turn, two rounds, Wan tiling and H16 S49152 top-64; dense FA2's backward on the
# Wan shape; then vsa bench's five backward cases beside FastVideo (the Hopper kernels: main's).
# Predicted before the call: portable backward −0.5 to −2 % (level possible).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
VSA_CUDA_KERNEL=sm80 timeout 200 $t --gtest_brief=1 --gtest_filter='*Backward*:DqPaths*:*Layer*' > "$OUT/tests-sm80.log" 2>&1
echo "portable backward and layer tests rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-sm80.log" | head -20 >> "$S"
VSA_CUDA_KERNEL=sm80 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='DimsAndBlocks/CudaBackwardPartialBlocks.*/0:*QueryPadding*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $? ($((SECONDS - start)) s)" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
wait; cat /tmp/main.rc >> "$S"; tail -n 1 /tmp/tk-build.log >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) portable A/B (VSA_CUDA_KERNEL=sm80), 8 calls a timing: main, new in turn, two rounds" >> "$S"
for r in 1 2; do
  for case in "12 624 63 128 64 2 2 8" "16 768 64 128 64 0 2 8"; do
    for v in main new; do
      echo "$v sm80 $case: $(VSA_CUDA_KERNEL=sm80 timeout 60 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) dense FA2 backward, Wan shape" >> "$S"
timeout 60 python3 bench/results/2026-12-02-h200-portable-bwd/fa2_dense_bwd_time.py >> "$S" 2>&1
if (( SECONDS - start < 450 )); then
  echo "== $(date -u +%T) vsa bench attention with FastVideo" >> "$S"
  PYTHONPATH=$PEERS timeout $((585 - (SECONDS - start))) vsa bench --case wan2.1-1.3b-480p --case synthetic-49k \
    --case synthetic-b2-16k --case synthetic-49k-top192 --case hunyuan-720p --backends vsa,fastvideo-tk,fastvideo-triton \
    --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
  echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic|hunyuan)" "$OUT/attention.log" | head -40 >> "$S"
  rm -rf "$OUT/attention"
fi
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
