#!/usr/bin/env bash
# Session 24, call 1: branch bwd-next = main e9f0a63 + delta beside the KV->Q lists on a side
# stream (dd24b0f) + no dSᵀ stores for a warp of padding keys (4eef285). Built beside it:
# main (.gpubin/main) and main + the dSᵀ change alone (.gpubin/ds), vsa_kernel_bench only.
# The C++ GPU suite and memcheck of the partial-block / query-padding backward (new); the A/B
# with the host ahead (8 calls per timing, `vsa_kernel_bench ... 8`): main, ds, new in turn,
# twice, on the Wan tiling without and with query padding; vsa bench Wan beside FastVideo; the
# layer beside FastVideo and its training step by launch; the GPU Python tests of the backward, layer, torch and compile.
# Predicted before the call: ds −0 to −1 %, delta beside the lists −1 % more with the host ahead.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
for v in main ds; do
  ( cmake -S .gpubin/$v -B /tmp/build-$v -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
      -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/$v-build.log 2>&1 &&
    ninja -C /tmp/build-$v vsa_kernel_bench >> /tmp/$v-build.log 2>&1; echo "$v build rc $?" > /tmp/$v.rc ) &
done
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
timeout 120 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1; echo "suite rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -20 >> "$S"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='DimsAndBlocks/CudaBackwardPartialBlocks.*/0:DimsAndBlocks/CudaBackwardPartialBlocks.*/1:*QueryPadding*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
wait; cat /tmp/main.rc /tmp/ds.rc >> "$S"; tail -n 1 /tmp/tk-build.log >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [ds]=/tmp/build-ds/bench/kernel/vsa_kernel_bench
                [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B, 8 calls a timing: main, ds, new in turn, twice" >> "$S"
for r in 1 2; do
  for case in "12 624 63 128 64 2 2 8" "12 624 63 128 64 3 2 8"; do
    for v in main ds new; do
      echo "$v $case: $(timeout 40 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) vsa bench Wan with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 120 vsa bench --case wan2.1-1.3b-480p --backends vsa,fastvideo-tk,fastvideo-triton --iters 20 \
  --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" >> "$S"
echo "== $(date -u +%T) vsa bench layer with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 90 vsa bench --op layer --case wan2.1-1.3b-480p --backends vsa,vsa-fine,fastvideo-tk --iters 30 \
  --out "$OUT/layer" > "$OUT/layer.log" 2>&1
echo "layer rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)" "$OUT/layer.log" >> "$S"
echo "== $(date -u +%T) the layer's training step by launch" >> "$S"
timeout 60 python3 bench/results/2026-12-03-h200-bwd-next/layer_timeline.py > "$OUT/layer-timeline.log" 2>&1
echo "layer timeline rc $?" >> "$S"; grep -v -i warn "$OUT/layer-timeline.log" | head -60 >> "$S"
rm -rf "$OUT/attention" "$OUT/layer"
echo "== $(date -u +%T) GPU Python tests" >> "$S"
timeout 150 python3 -m pytest tests/python/test_cuda_backward.py tests/python/test_cuda_layer.py tests/python/test_compile.py \
  tests/python/test_torch_gpu.py -q -p no:cacheprovider > "$OUT/pytest.log" 2>&1
tail -n 1 "$OUT/pytest.log" >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
