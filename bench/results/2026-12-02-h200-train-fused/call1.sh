#!/usr/bin/env bash
# Session 15, call 1: the layer's training forward in one kernel (ForwardParams::fine), the KV
# lists' range counts side by side and the coarse keys kernel's rows through shared memory = new,
# main c488d3a = main. The whole GPU C++ suite, the GPU
# Python tests of the layer, the backward and the ops' opcheck; A/B main vs new (graph_times),
# twice; the training step by kernel; ncu on the coarse backward's two kernels (where they stall).
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
echo "== $(date -u +%T) GPU Python tests: layer, backward, opcheck of the layer ops (new)" >> "$S"
timeout 150 python3 -m pytest tests/python/test_cuda_layer.py tests/python/test_cuda_backward.py tests/python/test_opcheck.py \
  -k "not opcheck or coarse or fine_stage or gate" -q -p no:cacheprovider > "$OUT/pytest.log" 2>&1; tail -n 1 "$OUT/pytest.log" >> "$S"
wait; cat /tmp/main.rc >> "$S"
echo "== $(date -u +%T) A/B: graph_times layer, layer-train, bwd: main, new, twice" >> "$S"
for r in 1 2; do
  for v in main new; do
    pp=""; [[ $v == main ]] && pp=/tmp/pkg-main
    echo "-- $v round $r" >> "$S"
    PYTHONPATH=$pp timeout 90 python3 bench/layer/graph_times.py --parts fine,layer,layer-train,bwd --rounds 3 >> "$S" 2>&1
  done
done
echo "== $(date -u +%T) the layer's training step by kernel (new)" >> "$S"
timeout 60 python3 bench/results/2026-12-02-h200-next/train_kernels.py > "$OUT/train-kernels.log" 2>&1
head -n 24 "$OUT/train-kernels.log" >> "$S"; tail -n 1 "$OUT/train-kernels.log" >> "$S"
echo "== $(date -u +%T) ncu: the coarse backward's kernels, stall reasons and memory (new)" >> "$S"
timeout 150 ncu --clock-control none -k "regex:coarse_rows|coarse_keys" --launch-skip 2 --launch-count 2 \
  --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
  --section Occupancy --section LaunchStats \
  python3 bench/results/2026-12-02-h200-coarse-bwd/train_steps.py > "$OUT/ncu-coarse.log" 2>&1
echo "ncu rc $?" >> "$S"
grep -E "coarse_|Duration|Stall|Warp Cycles Per Issued|Issued Warp|L1/TEX Hit|Mem Busy|Max Bandwidth|L1/TEX Cache Throughput|Registers Per|Achieved Occupancy|Active Warps Per" \
  "$OUT/ncu-coarse.log" >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
