#!/usr/bin/env bash
# Session 23, call 5: main with the forward op's autograd no longer filling lse's gradient
# (43419b1): the GPU Python tests of the attention's backward, the layer, compile and torch
# (CUDA graphs), and vsa bench's Wan case beside FastVideo once more.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
echo "== $(date -u +%T) GPU Python tests" >> "$S"
timeout 200 python3 -m pytest tests/python/test_cuda_backward.py tests/python/test_cuda_layer.py tests/python/test_compile.py \
  tests/python/test_torch_gpu.py tests/python/test_attention_backward.py -q -p no:cacheprovider > "$OUT/pytest.log" 2>&1
tail -n 1 "$OUT/pytest.log" >> "$S"
wait; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) vsa bench Wan with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 120 vsa bench --case wan2.1-1.3b-480p --backends vsa,fastvideo-tk,fastvideo-triton --iters 20 \
  --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" >> "$S"
rm -rf "$OUT/attention"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
