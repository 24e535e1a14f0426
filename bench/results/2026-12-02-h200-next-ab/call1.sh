#!/usr/bin/env bash
# Next session's first device call (prepared 2026-12-02, session 11). Checkout: branch next-ab2 = main +
# coarse-keys-once (key means quantized once per KV head into a coarse-stage workspace) + kv-scan (KV lists:
# one-pass scan, placement without a sort). Rebase/re-merge on main first if main moved.
# The device tree is next-ab2: gpu.sh builds and tests it (whole GPU suite: the branches' kernels, and main's
# d32b18d test refactor, run for the first time). main is a second package for the A/B.
# Prepare: git checkout next-ab2; rm -rf .gpubin/main && mkdir -p .gpubin/main && git archive main | tar -x -C .gpubin/main
#   cp bench/results/2026-12-02-h200-block-means/graph_means.py graph_means.py; cp /work/notes/call-next.sh call.sh
# run(carry=[".gtest",".whl",".gpubin",".peers"], command="COMMIT=<next-ab2 hash> bash call.sh > /dev/null 2>&1; cat $OUT/summary-main.txt")
# Predictions (kernel-notes on the branches): coarse stage 112 -> 103-106 us (layer fwd -3..-7 us);
# backward -65..-70 us (KV lists 100 -> ~30 us).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
( cd .gpubin/main && python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/pkg-main \
    -C cmake.define.VSA_CUDA_ARCHS=90a-real -C build-dir=/tmp/build-main . > /tmp/main-pip.log 2>&1; echo "main pip rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python ctest
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
wait; cat /tmp/main.rc >> "$S"
echo "== $(date -u +%T) GPU Python tests of the layer and the backward (next-ab2)" >> "$S"
timeout 150 python3 -m pytest tests/python/test_cuda_layer.py tests/python/test_cuda_backward.py -q -p no:cacheprovider \
  > "$OUT/pytest.log" 2>&1; tail -n 1 "$OUT/pytest.log" >> "$S"
echo "== $(date -u +%T) A/B: graph timing (coarse stage, layer) and vsa bench backward, main then next-ab2, twice" >> "$S"
for r in 1 2; do
  for v in main next-ab2; do
    pp=""; [[ $v == main ]] && pp=/tmp/pkg-main
    echo "-- $v round $r" >> "$S"
    PYTHONPATH=$pp timeout 60 python3 graph_means.py 2>&1 | grep -E "launch|layer|fine" >> "$S"
    PYTHONPATH=$pp timeout 90 python3 -m vsa bench --case wan2.1-1.3b-480p --backends vsa,vsa-rows --iters 20 \
      2>&1 | grep -E "^  vsa(-rows)?: " >> "$S"
  done
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
