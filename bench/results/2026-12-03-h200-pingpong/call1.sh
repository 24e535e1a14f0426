#!/usr/bin/env bash
# Session 28, call 1: branch key-pass-pingpong (the stored-dS key pass as one CTA of two
# warpgroups on one key tile, their products in ping-pong turns) against main (e9bcda2,
# .gpubin/main) and against the same kernel without the turns (.gpubin/noturn), built beside it.
# The C++ GPU backward tests, memcheck and synccheck of the partial-block and query-padding
# backward on the branch; the A/B with the host ahead (8 calls a timing), the three builds in
# turn: Wan tiling, H16 S49152 top-64 and top-192 (three rounds), H16 blk 128 top-32 and Wan at
# D = 64 deterministic (round 1); vsa bench's backward cases beside FastVideo on the branch.
# Predicted before the call (docs/kernel-notes.md): −2 to −6 % on Wan and H16; without the
# turns level to +3 %.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
for v in main noturn; do
  ( cmake -S .gpubin/$v -B /tmp/build-$v -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
      -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/$v-build.log 2>&1 &&
    ninja -C /tmp/build-$v vsa_kernel_bench >> /tmp/$v-build.log 2>&1; echo "$v build rc $?" > /tmp/$v.rc ) &
done
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
timeout 150 $t --gtest_brief=1 --gtest_filter='*CudaBackward*:*DqMethod*:CudaSweep.Backward*' > "$OUT/tests.log" 2>&1
rc=$?; echo "backward tests rc $rc ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -20 >> "$S"
if (( rc == 124 )); then tail -n 5 "$OUT/tests.log" >> "$S"; echo "== hung: nothing more" >> "$S"; exit 0; fi
for tool in memcheck synccheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 10 $t \
    --gtest_filter='DimsAndBlocks/CudaBackwardPartialBlocks.*/0:*QueryPadding*' --gtest_brief=1 > "$OUT/$tool.log" 2>&1
  echo "$tool rc $? ($((SECONDS - start)) s)" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/$tool.log" | head -5 >> "$S"
done
wait; cat /tmp/main.rc /tmp/noturn.rc >> "$S"; tail -n 1 /tmp/tk-build.log >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [noturn]=/tmp/build-noturn/bench/kernel/vsa_kernel_bench
                [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B, 8 calls a timing: main, noturn, new in turn" >> "$S"
for r in 1 2 3; do
  cases=("12 624 63 128 64 2 2 8" "16 768 64 128 64 0 2 8" "16 768 192 128 64 0 2 8")
  (( r == 1 )) && cases+=("16 384 32 128 128 0 2 8" "12 624 63 64 64 2 3 8")
  for case in "${cases[@]}"; do
    for v in main noturn new; do
      echo "$v $case: $(timeout 60 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
  (( SECONDS - start > 360 )) && break
done
if (( SECONDS - start < 450 )); then
  echo "== $(date -u +%T) vsa bench attention with FastVideo, the branch" >> "$S"
  PYTHONPATH=$PEERS timeout $((585 - (SECONDS - start))) vsa bench --case wan2.1-1.3b-480p --case synthetic-49k \
    --case synthetic-b2-16k --case synthetic-49k-top192 --backends vsa,fastvideo-tk,fastvideo-triton --iters 20 \
    --out "$OUT/attention" > "$OUT/attention.log" 2>&1
  echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -40 >> "$S"
  rm -rf "$OUT/attention"
fi
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
