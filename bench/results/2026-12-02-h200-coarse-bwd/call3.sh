#!/usr/bin/env bash
# Session 14, call 3: coarse backward v3 (two warps per row tile, scores stored in pass 1) and the KV
# lists placed in eight query-block ranges per head = new, main ea9ab65 = main. The whole GPU C++ suite,
# memcheck of the coarse backward, GPU Python tests of the layer and the backward; A/B main vs new
# (graph_times), twice; the training step by kernel; then vsa's layer beside FastVideo's (TK) in the
# same run (vsa bench --op layer) and the attention on Wan 480p beside FastVideo's TK and Triton kernels.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
( cd .gpubin/main && python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/pkg-main \
    -C cmake.define.VSA_CUDA_ARCHS=90a-real -C build-dir=/tmp/build-main . > /tmp/main-pip.log 2>&1; echo "main pip rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
echo "== $(date -u +%T) ctest (new)" >> "$S"
ctest --test-dir build/gpu --timeout 300 -j 4 > "$OUT/ctest.log" 2>&1; echo "rc $?" >> "$S"
grep -E "tests passed|tests failed" "$OUT/ctest.log" >> "$S"
timeout 60 build/gpu/tests/cuda/vsa_cuda_tests --gtest_filter='*CudaCoarseStageBackward*' 2>&1 | grep -E "^\[ diff" >> "$S"
timeout 120 compute-sanitizer --tool memcheck build/gpu/tests/cuda/vsa_cuda_tests \
  --gtest_filter='*CudaCoarseStageBackward*' > "$OUT/memcheck.log" 2>&1; echo "memcheck rc $?" >> "$S"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" >> "$S"
echo "== $(date -u +%T) GPU Python tests: layer, backward, opcheck of the coarse ops (new)" >> "$S"
timeout 150 python3 -m pytest tests/python/test_cuda_layer.py tests/python/test_cuda_backward.py tests/python/test_opcheck.py \
  -k "not opcheck or coarse" -q -p no:cacheprovider > "$OUT/pytest.log" 2>&1; tail -n 1 "$OUT/pytest.log" >> "$S"
wait; cat /tmp/main.rc >> "$S"; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) A/B: graph_times coarse-bwd, bwd, layer-train: main, new, twice" >> "$S"
for r in 1 2; do
  for v in main new; do
    pp=""; [[ $v == main ]] && pp=/tmp/pkg-main
    echo "-- $v round $r" >> "$S"
    PYTHONPATH=$pp timeout 60 python3 bench/layer/graph_times.py --parts coarse-bwd,bwd,layer-train --rounds 3 >> "$S" 2>&1
  done
done
echo "== $(date -u +%T) the layer's training step by kernel (new)" >> "$S"
timeout 60 python3 bench/results/2026-12-02-h200-next/train_kernels.py > "$OUT/train-kernels.log" 2>&1
head -n 20 "$OUT/train-kernels.log" >> "$S"; tail -n 1 "$OUT/train-kernels.log" >> "$S"
echo "== $(date -u +%T) vsa bench layer with FastVideo (new)" >> "$S"
PYTHONPATH=$PEERS timeout 150 vsa bench --op layer --case wan2.1-1.3b-480p --backends vsa,vsa-fine,fastvideo-tk --iters 30 \
  --out "$OUT/layer" > "$OUT/layer.log" 2>&1
echo "layer rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)" "$OUT/layer.log" >> "$S"
echo "== $(date -u +%T) vsa bench attention (Wan 480p) with FastVideo (new)" >> "$S"
PYTHONPATH=$PEERS timeout 120 vsa bench --case wan2.1-1.3b-480p --backends vsa,vsa-rows,fastvideo-tk,fastvideo-triton \
  --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)" "$OUT/attention.log" >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
