#!/usr/bin/env bash
# Session 14, call 3: coarse backward v3 (two warps per row tile, scores stored in pass 1) = new,
# main ea9ab65 = main. GPU layer tests (C++ with memcheck and racecheck of the coarse backward, Python
# + opcheck + compile); A/B main vs new (graph_times), twice; the training step by kernel; then vsa's
# layer beside FastVideo's (TK) in the same run (vsa bench --op layer).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
( cd .gpubin/main && python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/pkg-main \
    -C cmake.define.VSA_CUDA_ARCHS=90a-real -C build-dir=/tmp/build-main . > /tmp/main-pip.log 2>&1; echo "main pip rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
echo "== $(date -u +%T) GPU C++ tests of the layer (new)" >> "$S"
timeout 120 build/gpu/tests/cuda/vsa_cuda_tests --gtest_filter='*Coarse*:*BlockMean*:*GateCombine*' \
  > "$OUT/layer-tests.log" 2>&1; echo "rc $?" >> "$S"
grep -E "^\[ diff|PASSED|FAILED" "$OUT/layer-tests.log" >> "$S"
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool build/gpu/tests/cuda/vsa_cuda_tests \
    --gtest_filter='*CudaCoarseStageBackward*' > "$OUT/$tool.log" 2>&1; echo "$tool rc $?" >> "$S"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$tool.log" >> "$S"
done
echo "== $(date -u +%T) GPU Python tests: layer, opcheck, compile (new)" >> "$S"
timeout 150 python3 -m pytest tests/python/test_cuda_layer.py tests/python/test_opcheck.py tests/python/test_compile.py \
  -q -p no:cacheprovider > "$OUT/pytest.log" 2>&1; tail -n 1 "$OUT/pytest.log" >> "$S"
wait; cat /tmp/main.rc >> "$S"; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) A/B: graph_times coarse-bwd, layer, layer-train: main, new, twice" >> "$S"
for r in 1 2; do
  for v in main new; do
    pp=""; [[ $v == main ]] && pp=/tmp/pkg-main
    echo "-- $v round $r" >> "$S"
    PYTHONPATH=$pp timeout 60 python3 bench/layer/graph_times.py --parts coarse-bwd,fine,layer,layer-train --rounds 3 >> "$S" 2>&1
  done
done
echo "== $(date -u +%T) the layer's training step by kernel (new)" >> "$S"
timeout 60 python3 bench/results/2026-12-02-h200-next/train_kernels.py > "$OUT/train-kernels.log" 2>&1
head -n 20 "$OUT/train-kernels.log" >> "$S"; tail -n 1 "$OUT/train-kernels.log" >> "$S"
echo "== $(date -u +%T) vsa bench layer with FastVideo (new)" >> "$S"
PYTHONPATH=$PEERS timeout 150 vsa bench --op layer --case wan2.1-1.3b-480p --backends vsa,vsa-fine,fastvideo-tk --iters 30 \
  --out "$OUT/layer" > "$OUT/layer.log" 2>&1
echo "layer rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)" "$OUT/layer.log" >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
