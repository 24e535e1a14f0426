#!/usr/bin/env bash
# Session 14, call 2: coarse backward v2 (TF32 operands rounded once, 16-byte fragment reads) = new,
# main ea9ab65 = main. GPU layer tests (C++ incl. memcheck of the coarse backward, Python + opcheck);
# A/B main vs new (graph_times), twice; the training step by kernel; ncu on the coarse backward's kernels.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
( cd .gpubin/main && python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/pkg-main \
    -C cmake.define.VSA_CUDA_ARCHS=90a-real -C build-dir=/tmp/build-main . > /tmp/main-pip.log 2>&1; echo "main pip rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
echo "== $(date -u +%T) GPU C++ tests of the layer (new)" >> "$S"
timeout 120 build/gpu/tests/cuda/vsa_cuda_tests --gtest_filter='Cuda*Coarse*:CudaBlockMean*:CudaGateCombine*' \
  > "$OUT/layer-tests.log" 2>&1; echo "rc $?" >> "$S"
grep -E "^\[ diff|PASSED|FAILED" "$OUT/layer-tests.log" >> "$S"
timeout 120 compute-sanitizer --tool memcheck build/gpu/tests/cuda/vsa_cuda_tests \
  --gtest_filter='CudaCoarseStageBackward*' > "$OUT/memcheck.log" 2>&1; echo "memcheck rc $?" >> "$S"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" >> "$S"
echo "== $(date -u +%T) GPU Python tests: layer, opcheck (new)" >> "$S"
timeout 150 python3 -m pytest tests/python/test_cuda_layer.py tests/python/test_opcheck.py tests/python/test_compile.py \
  -q -p no:cacheprovider > "$OUT/pytest.log" 2>&1; tail -n 1 "$OUT/pytest.log" >> "$S"
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
head -n 20 "$OUT/train-kernels.log" >> "$S"; tail -n 1 "$OUT/train-kernels.log" >> "$S"
echo "== $(date -u +%T) ncu: the coarse backward's kernels in the training step (new)" >> "$S"
timeout 120 ncu --clock-control none -k "regex:coarse_rows|coarse_keys|round_means" --launch-skip 3 --launch-count 3 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  python3 bench/results/2026-12-02-h200-coarse-bwd/train_steps.py > "$OUT/ncu-train.log" 2>&1
echo "ncu rc $?" >> "$S"
grep -E "^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|L1/TEX Cache Throughput|Issued Warp|Warp Cycles Per Issued" \
  "$OUT/ncu-train.log" >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
