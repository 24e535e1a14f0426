#!/usr/bin/env bash
# Session 27, call 4: main b5d2c2c as it lands (the stored dS tiles' evict-first stores): the C++
# GPU backward and layer tests with either family, the GPU Python tests of the backward, the
# layer, torch.compile and CUDA graphs, and the layer's forward + backward beside FastVideo.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
for fam in default sm80; do
  env $([ $fam = sm80 ] && echo VSA_CUDA_KERNEL=sm80) timeout 150 $t --gtest_brief=1 \
    --gtest_filter='*Backward*:DqPaths*:*DqMethod*:*Layer*' > "$OUT/tests-$fam.log" 2>&1
  echo "backward and layer tests ($fam) rc $? ($((SECONDS - start)) s)" >> "$S"
  grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-$fam.log" | head -20 >> "$S"
done
timeout 200 python3 -m pytest -q -x tests/python/test_cuda_backward.py tests/python/test_cuda_layer.py tests/python/test_layer.py \
  tests/python/test_compile.py tests/python/test_torch_gpu.py > "$OUT/pytest.log" 2>&1
echo "GPU pytest rc $? ($((SECONDS - start)) s)" >> "$S"; tail -n 3 "$OUT/pytest.log" >> "$S"
wait; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) vsa bench layer with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 120 vsa bench --op layer --case wan2.1-1.3b-480p --backends vsa,vsa-fine,fastvideo-tk --iters 30 \
  --out "$OUT/layer" > "$OUT/layer.log" 2>&1
echo "layer rc $?" >> "$S"; grep -vE "^\s*$" "$OUT/layer.log" | tail -n 12 >> "$S"
rm -rf "$OUT/layer" "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
