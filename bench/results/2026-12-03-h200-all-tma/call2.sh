#!/usr/bin/env bash
# Session 23, call 2: main (22c67fc, the stored key pass's full query tiles by TMA) on the GPU
# beyond session 22's C++ suite: the backward's launches on the device clock and the host's
# side of them (timeline.py); whether a group's dQ pass beside the next group's key pass would
# pay (overlap_probe.py); the C++ GPU suite; memcheck of the backward with partial blocks and
# query padding; vsa bench (forward and backward, then the layer) beside FastVideo's
# ThunderKittens and Triton kernels; the GPU Python tests of the backward, the layer, compile
# and torch.
# Expected before the call: Wan backward in vsa bench ~5.45–5.55 ms (5.638 in call 3 of
# 2026-12-03-h200-stored-ds, less 2–3 %); call 1's 140 µs idle before the backward's first
# launch shows on the host as one long call.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
D=bench/results/2026-12-03-h200-all-tma
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
echo "== $(date -u +%T) timeline" >> "$S"
for f in "" --q-padding; do timeout 60 python3 $D/timeline.py $f >> "$OUT/timeline.log" 2>&1; done
grep -E "span|sum of" "$OUT/timeline.log" >> "$S"
echo "== $(date -u +%T) overlap probe" >> "$S"
timeout 120 python3 $D/overlap_probe.py > "$OUT/overlap.log" 2>&1; echo "rc $?" >> "$S"; grep -v Warn "$OUT/overlap.log" >> "$S"
echo "== $(date -u +%T) C++ GPU suite" >> "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
timeout 120 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1; echo "suite rc $?" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -20 >> "$S"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='DimsAndBlocks/CudaBackwardPartialBlocks.*/0:DimsAndBlocks/CudaBackwardPartialBlocks.*/1:*QueryPadding*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
wait; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) vsa bench attention, forward and backward, with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 170 vsa bench --case wan2.1-1.3b-480p --case synthetic-49k --case synthetic-b2-16k \
  --backends vsa,fastvideo-tk,fastvideo-triton --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -30 >> "$S"
echo "== $(date -u +%T) vsa bench layer with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 90 vsa bench --op layer --case wan2.1-1.3b-480p --backends vsa,vsa-fine,fastvideo-tk --iters 30 \
  --out "$OUT/layer" > "$OUT/layer.log" 2>&1
echo "layer rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)" "$OUT/layer.log" >> "$S"
echo "== $(date -u +%T) GPU Python tests" >> "$S"
timeout 150 python3 -m pytest tests/python/test_cuda_backward.py tests/python/test_cuda_layer.py tests/python/test_compile.py \
  tests/python/test_torch_gpu.py -q -p no:cacheprovider > "$OUT/pytest.log" 2>&1
tail -n 1 "$OUT/pytest.log" >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
