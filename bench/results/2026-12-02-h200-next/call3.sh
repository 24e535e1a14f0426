#!/usr/bin/env bash
# Session 13, call 3: branch next + dq_finish per tile + batched KV-list counts (b88d003). GPU suite, layer/backward pytest;
# A/B main (5ca7967), base (e6e77a8 = next at call 1) and new, twice; the training step by kernel (new).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
for v in main base; do
  ( cd .gpubin/$v && python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/pkg-$v \
      -C cmake.define.VSA_CUDA_ARCHS=90a-real -C build-dir=/tmp/build-$v . > /tmp/$v-pip.log 2>&1; echo "$v pip rc $?" > /tmp/$v.rc ) &
done
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python ctest
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
wait; cat /tmp/main.rc /tmp/base.rc >> "$S"
echo "== $(date -u +%T) GPU Python tests of the layer and the backward (new)" >> "$S"
timeout 150 python3 -m pytest tests/python/test_cuda_layer.py tests/python/test_cuda_backward.py -q -p no:cacheprovider \
  > "$OUT/pytest.log" 2>&1; tail -n 1 "$OUT/pytest.log" >> "$S"
echo "== $(date -u +%T) A/B: graph_times bwd, bwd-rows, layer-train: main, base, new, twice" >> "$S"
for r in 1 2; do
  for v in main base new; do
    pp=""; [[ $v != new ]] && pp=/tmp/pkg-$v
    echo "-- $v round $r" >> "$S"
    PYTHONPATH=$pp timeout 60 python3 bench/layer/graph_times.py --parts bwd,bwd-rows,layer-train --rounds 3 >> "$S" 2>&1
  done
done
echo "== $(date -u +%T) the layer's training step by kernel (new)" >> "$S"
timeout 60 python3 bench/results/2026-12-02-h200-next/train_kernels.py > "$OUT/train-kernels.log" 2>&1
grep -E "bwd_kernel|dq_finish|all kernels" "$OUT/train-kernels.log" >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
