#!/usr/bin/env bash
# Session 29, call 3: main as landed (the stats row and the whole-tile boxes), checked whole:
# the build and every C++ GPU suite through ctest (the default kernels, the portable ones, the
# warp-specialized forward, the Hopper atomic dq path), the GPU Python tests; the portable
# backward beside dense FA2's on the Wan shape (issue 10's parity goal); then vsa bench beside
# FastVideo (five backward cases), a second run of this code.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python ctest > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
echo "== $(date -u +%T) GPU Python tests" >> "$S"
timeout 150 python3 -m pytest -q tests/python/test_cuda_backward.py tests/python/test_cuda_layer.py \
  tests/python/test_layer.py tests/python/test_compile.py tests/python/test_torch_gpu.py > "$OUT/pytest.log" 2>&1
echo "pytest rc $? ($((SECONDS - start)) s)" >> "$S"; tail -n 2 "$OUT/pytest.log" >> "$S"
echo "== $(date -u +%T) portable backward (VSA_CUDA_KERNEL=sm80) and dense FA2's, Wan shape" >> "$S"
kb=build/gpu/bench/kernel/vsa_kernel_bench
for r in 1 2; do
  echo "sm80 12 624 63 128 64 2 2 8: $(VSA_CUDA_KERNEL=sm80 timeout 60 $kb 12 624 63 128 64 2 2 8 2>&1 | tail -n 1)" >> "$S"
done
timeout 60 python3 bench/results/2026-12-02-h200-portable-bwd/fa2_dense_bwd_time.py >> "$S" 2>&1
wait; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) vsa bench attention with FastVideo, main" >> "$S"
PYTHONPATH=$PEERS timeout $((560 - (SECONDS - start))) vsa bench --case wan2.1-1.3b-480p --case synthetic-49k \
  --case synthetic-b2-16k --case synthetic-49k-top192 --case hunyuan-720p --backends vsa,fastvideo-tk,fastvideo-triton \
  --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -40 >> "$S"
rm -rf "$OUT/attention" "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
