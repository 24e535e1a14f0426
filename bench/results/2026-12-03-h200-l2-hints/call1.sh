#!/usr/bin/env bash
# Session 27, call 1: branch l2-hints (84c66ef: the stored dSᵀ tiles written .cs and read with an
# L2 evict-first policy, both families) against main (4263ee8, .gpubin/main), built beside it.
# The C++ GPU backward tests with either family and memcheck of the partial-block and
# query-padding backward on the branch; the A/B with the host ahead (8 calls a timing), main and
# new in turn, two rounds: Wan tiling, H16 S49152 top-64 and top-192; the dSᵀ cap at 8 and 20 GB
# (VSA_CUDA_DS_WORKSPACE_MB) on top-192 and top-64, both builds; vsa bench's backward cases beside
# FastVideo on the branch if time is left.
# Predicted before the call: top-192 −1 to −2.5 %, Wan ≤ −0.5 %, H16 top-64 in between.
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
for fam in default sm80; do
  env $([ $fam = sm80 ] && echo VSA_CUDA_KERNEL=sm80) timeout 150 $t --gtest_brief=1 \
    --gtest_filter='*CudaBackward*:*DqMethod*:CudaSweep.Backward*' > "$OUT/tests-$fam.log" 2>&1
  echo "backward tests ($fam) rc $? ($((SECONDS - start)) s)" >> "$S"
  grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-$fam.log" | head -20 >> "$S"
done
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='DimsAndBlocks/CudaBackwardPartialBlocks.*/0:*QueryPadding*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $? ($((SECONDS - start)) s)" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
wait; cat /tmp/main.rc >> "$S"; tail -n 1 /tmp/tk-build.log >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B, 8 calls a timing: main, new in turn, two rounds" >> "$S"
for r in 1 2; do
  for case in "12 624 63 128 64 2 2 8" "16 768 64 128 64 0 2 8" "16 768 192 128 64 0 2 8"; do
    for v in main new; do
      echo "$v $case: $(timeout 60 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) the dS cap (MB), main and new in turn" >> "$S"
for mb in 20480 8192; do
  for case in "16 768 192 128 64 0 2 8" "16 768 64 128 64 0 2 8"; do
    [ $mb = 20480 ] && [[ $case == *" 64 128 64 0 2 8" ]] && continue
    for v in main new; do
      echo "$v cap $mb $case: $(VSA_CUDA_DS_WORKSPACE_MB=$mb timeout 60 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
if (( SECONDS - start < 440 )); then
  echo "== $(date -u +%T) vsa bench backward with FastVideo, the branch" >> "$S"
  PYTHONPATH=$PEERS timeout $((570 - (SECONDS - start))) vsa bench --case wan2.1-1.3b-480p --case synthetic-49k \
    --case synthetic-b2-16k --case synthetic-49k-top192 --backends vsa,fastvideo-tk,fastvideo-triton --iters 20 \
    --out "$OUT/attention" > "$OUT/attention.log" 2>&1
  echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -40 >> "$S"
  rm -rf "$OUT/attention"
fi
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
