#!/usr/bin/env bash
# Session 19, call 4: the two backward cases of issue 10 that call 3 left out, on the tree as
# committed (197e0f6's kernels): H16 S49152 top-k 192 and HunyuanVideo 720p (H24, 2160 blocks,
# top-k 216; its dSᵀ tiles take 3.8 GB per head, so the stored-dS passes run in 24 groups of one
# head under the 4096 MB cap), forward and backward beside FastVideo's ThunderKittens and
# Triton kernels.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh python
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
wait; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) vsa bench attention, forward and backward, with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 150 vsa bench --case synthetic-49k-top192 --case hunyuan-720p \
  --backends vsa,fastvideo-tk,fastvideo-triton --iters 5 --warmup 2 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -30 >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
