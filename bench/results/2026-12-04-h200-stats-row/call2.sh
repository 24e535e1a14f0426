#!/usr/bin/env bash
# Session 29, call 2: branch key-pass-whole-tiles (the stored key pass requests a pair's Q and dO as one
# TMA box each, from warps 0 and 1; the list copy on thread 64) against main (c2e3bfb, .gpubin/main)
# built beside it. All C++ GPU tests (360) and memcheck on the branch; the A/B with
# the host ahead (8 calls a timing), main and branch in turn, three rounds: Wan tiling, H16
# S49152 top-64, B1 H24 S16384 top-32 (B2's work), and in round 1 H16 top-192 and Wan at D = 64;
# then vsa bench beside FastVideo (five backward cases and the layer) on the branch.
# Predicted before the call (docs/kernel-notes.md): −0.5 to −1.5 % at D = 128, about level at D = 64.
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
timeout 200 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1
rc=$?; echo "C++ GPU tests rc $rc ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -20 >> "$S"
$t --gtest_filter='*TensorMaps*' 2>&1 | grep -E "^\[  (PASSED|SKIPPED|FAILED)" >> "$S"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='DimsAndBlocks/CudaBackwardPartialBlocks.*/0:*QueryPadding*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $? ($((SECONDS - start)) s)" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
wait; cat /tmp/main.rc >> "$S"; tail -n 1 /tmp/tk-build.log >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B, 8 calls a timing: main, new in turn" >> "$S"
for r in 1 2 3; do
  cases=("12 624 63 128 64 2 2 8" "16 768 64 128 64 0 2 8" "24 256 32 128 64 0 2 8")
  (( r == 1 )) && cases+=("16 768 192 128 64 0 2 8" "12 624 63 64 64 2 2 8")
  for case in "${cases[@]}"; do
    for v in main new; do
      echo "$v $case: $(timeout 60 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
  (( SECONDS - start > 300 )) && break
done
echo "== $(date -u +%T) vsa bench attention with FastVideo, the branch" >> "$S"
PYTHONPATH=$PEERS timeout $((520 - (SECONDS - start))) vsa bench --case wan2.1-1.3b-480p --case synthetic-49k \
  --case synthetic-b2-16k --case synthetic-49k-top192 --case hunyuan-720p --backends vsa,fastvideo-tk,fastvideo-triton \
  --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -40 >> "$S"
rm -rf "$OUT/attention"
if (( SECONDS - start < 540 )); then
  echo "== $(date -u +%T) vsa bench layer" >> "$S"
  PYTHONPATH=$PEERS timeout $((575 - (SECONDS - start))) vsa bench --op layer --case wan2.1-1.3b-480p \
    --backends vsa,vsa-fine,fastvideo-tk --iters 30 > "$OUT/layer.log" 2>&1
  echo "layer rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|fwd\+bwd|vsa /" "$OUT/layer.log" | head -12 >> "$S"
fi
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
