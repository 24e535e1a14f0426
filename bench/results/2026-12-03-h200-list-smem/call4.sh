#!/usr/bin/env bash
# Session 26, call 4: main after the merge (7cb69ff: the spread TMA requests and the list entry
# through shared memory), vsa bench's five backward cases and the layer beside FastVideo once
# more, in a second call: call 3's H16 and B2 ratios (0.710) sat within 0.5 % of the goal, and the
# lent device's speed differs by up to 4 % between calls. No prediction: a measurement of what landed.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
wait; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) vsa bench attention, forward and backward, with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 220 vsa bench --case wan2.1-1.3b-480p --case synthetic-49k --case synthetic-b2-16k \
  --case synthetic-49k-top192 --case hunyuan-720p \
  --backends vsa,fastvideo-tk,fastvideo-triton --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -40 >> "$S"
echo "== $(date -u +%T) vsa bench layer with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 90 vsa bench --op layer --case wan2.1-1.3b-480p --backends vsa,vsa-fine,fastvideo-tk --iters 30 \
  --out "$OUT/layer" > "$OUT/layer.log" 2>&1
echo "layer rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)" "$OUT/layer.log" >> "$S"
rm -rf "$OUT/attention" "$OUT/layer" "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
