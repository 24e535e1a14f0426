#!/usr/bin/env bash
# Session 13, call 1: branch `next` (= main 5ca7967 + coarse search start + sm90 bwd two-stage dQ path).
# Whole GPU C++ suite + layer/backward pytest on `next`; A/B main (second package) vs next, twice.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
( cd .gpubin/main && python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/pkg-main \
    -C cmake.define.VSA_CUDA_ARCHS=90a-real -C build-dir=/tmp/build-main . > /tmp/main-pip.log 2>&1; echo "main pip rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python ctest
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
wait; cat /tmp/main.rc >> "$S"; tail -n 3 /tmp/main-pip.log >> "$S"
echo "== $(date -u +%T) GPU Python tests of the layer and the backward (next)" >> "$S"
timeout 150 python3 -m pytest tests/python/test_cuda_layer.py tests/python/test_cuda_backward.py -q -p no:cacheprovider \
  > "$OUT/pytest.log" 2>&1; tail -n 1 "$OUT/pytest.log" >> "$S"
echo "== $(date -u +%T) A/B: graph_times (next's tool) and vsa bench backward (random lists), main then next, twice" >> "$S"
for r in 1 2; do
  for v in main next; do
    pp=""; [[ $v == main ]] && pp=/tmp/pkg-main
    echo "-- $v round $r" >> "$S"
    PYTHONPATH=$pp timeout 75 python3 bench/layer/graph_times.py --parts coarse,fine,layer,layer-train,bwd,bwd-rows \
      --rounds 3 >> "$S" 2>&1
    [[ $r == 1 ]] && PYTHONPATH=$pp timeout 60 python3 -m vsa bench --case wan2.1-1.3b-480p --backends vsa,vsa-rows \
      --iters 20 2>&1 | grep -E "^  vsa(-rows)?: " >> "$S"
  done
done
echo "== $(date -u +%T) the layer's training step by kernel (next)" >> "$S"
timeout 60 python3 bench/results/2026-12-02-h200-next/train_kernels.py > "$OUT/train-kernels.log" 2>&1; tail -n 25 "$OUT/train-kernels.log" >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
