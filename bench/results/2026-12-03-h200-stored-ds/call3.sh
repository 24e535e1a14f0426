#!/usr/bin/env bash
# Session 19, call 3: the tree as committed: the Hopper kernels store dS at head dim 128 by
# default (and whenever deterministic); the Hopper dQ pass that recomputed S and dP is gone.
# The whole C++ GPU suite (ctest); vsa bench's backward on Wan 480p, H16 S49152 and B2 S16384
# beside FastVideo's ThunderKittens and Triton kernels; the layer beside FastVideo's; the GPU
# Python tests of the backward and the layer; the portable kernels' backward suites;
# vsa_kernel_bench on four shapes.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
echo "== $(date -u +%T) ctest" >> "$S"
timeout 150 ctest --test-dir build/gpu --timeout 140 -j 4 > "$OUT/ctest.log" 2>&1; echo "rc $?" >> "$S"
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout" "$OUT/ctest.log" >> "$S"
wait; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) vsa bench attention, forward and backward, with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 170 vsa bench --case wan2.1-1.3b-480p --case synthetic-49k --case synthetic-b2-16k \
  --backends vsa,fastvideo-tk,fastvideo-triton --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -30 >> "$S"
echo "== $(date -u +%T) vsa bench layer with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 90 vsa bench --op layer --case wan2.1-1.3b-480p --backends vsa,vsa-fine,fastvideo-tk --iters 30 \
  --out "$OUT/layer" > "$OUT/layer.log" 2>&1
echo "layer rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)" "$OUT/layer.log" >> "$S"
echo "== $(date -u +%T) GPU Python tests: backward, layer" >> "$S"
timeout 100 python3 -m pytest tests/python/test_cuda_backward.py tests/python/test_cuda_layer.py -q -p no:cacheprovider \
  > "$OUT/pytest.log" 2>&1; tail -n 1 "$OUT/pytest.log" >> "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
echo "== $(date -u +%T) portable kernels' backward suites (VSA_CUDA_KERNEL=sm80)" >> "$S"
VSA_CUDA_KERNEL=sm80 timeout 60 $t --gtest_brief=1 --gtest_filter='*Backward*:DqPaths*:*Layer*' > "$OUT/tests-sm80.log" 2>&1
echo "rc $?" >> "$S"; grep -E "^\[  PASSED|^\[  FAILED|tests ran" "$OUT/tests-sm80.log" | head -10 >> "$S"
echo "== $(date -u +%T) vsa_kernel_bench, backward (only 2: the default path)" >> "$S"
for case in "12 624 63 128 64 2 2" "16 768 64 128 64 0 2" "16 384 32 128 128 0 2" "12 624 63 64 64 1 2"; do
  echo "$case: $(timeout 40 build/gpu/bench/kernel/vsa_kernel_bench $case 2>&1 | tail -n 1)" >> "$S"
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
