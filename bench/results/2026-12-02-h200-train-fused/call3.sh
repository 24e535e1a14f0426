#!/usr/bin/env bash
# Session 15, call 3: the coarse rows kernel taking the scores again in pass 2 (no workspace round
# trip) = new, main c488d3a = main. The whole GPU C++ suite; memcheck and racecheck of the coarse
# backward; the GPU Python tests of the layer; A/B main vs new (graph_times), twice; the training
# step by kernel.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
( cd .gpubin/main && python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/pkg-main \
    -C cmake.define.VSA_CUDA_ARCHS=90a-real -C build-dir=/tmp/build-main . > /tmp/main-pip.log 2>&1; echo "main pip rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
echo "== $(date -u +%T) ctest (new)" >> "$S"
ctest --test-dir build/gpu --timeout 300 -j 4 > "$OUT/ctest.log" 2>&1; echo "rc $?" >> "$S"
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout" "$OUT/ctest.log" >> "$S"
timeout 60 build/gpu/tests/cuda/vsa_cuda_tests --gtest_filter='*CudaCoarseStageBackward*' 2>&1 | grep -E "^\[ diff|FAILED" >> "$S"
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool build/gpu/tests/cuda/vsa_cuda_tests \
    --gtest_filter='*CudaCoarseStageBackward*' > "$OUT/$tool.log" 2>&1; echo "$tool rc $?" >> "$S"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$tool.log" >> "$S"
done
echo "== $(date -u +%T) GPU Python tests: layer (new)" >> "$S"
timeout 120 python3 -m pytest tests/python/test_cuda_layer.py -q -p no:cacheprovider > "$OUT/pytest.log" 2>&1
tail -n 1 "$OUT/pytest.log" >> "$S"
wait; cat /tmp/main.rc >> "$S"
echo "== $(date -u +%T) A/B: graph_times coarse-bwd, layer-train: main, new, twice" >> "$S"
for r in 1 2; do
  for v in main new; do
    pp=""; [[ $v == main ]] && pp=/tmp/pkg-main
    echo "-- $v round $r" >> "$S"
    PYTHONPATH=$pp timeout 60 python3 bench/layer/graph_times.py --parts coarse-bwd,layer-train --rounds 3 >> "$S" 2>&1
  done
done
echo "== $(date -u +%T) the layer's training step by kernel (new)" >> "$S"
timeout 60 python3 bench/results/2026-12-02-h200-next/train_kernels.py > "$OUT/train-kernels.log" 2>&1
head -n 22 "$OUT/train-kernels.log" >> "$S"; tail -n 1 "$OUT/train-kernels.log" >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
