#!/usr/bin/env bash
# Session 24, call 2: main (e9f0a63's code). Is the device idle in the layer's training step
# because the host is behind (layer_host_probe.py: host against device time, the step in a CUDA
# graph, torch's sync check, the host's costliest ops)? The step by launch (layer_timeline.py),
# without call 1's side stream. vsa bench's three backward cases beside FastVideo.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
D=bench/results/2026-12-03-h200-bwd-next
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
echo "== $(date -u +%T) layer host probe" >> "$S"
timeout 120 python3 $D/layer_host_probe.py > "$OUT/host-probe.log" 2>&1; echo "rc $?" >> "$S"
grep -v -i "warn\|^\s*$" "$OUT/host-probe.log" | head -45 >> "$S"
echo "== $(date -u +%T) the layer's training step by launch" >> "$S"
timeout 60 python3 $D/layer_timeline.py > "$OUT/layer-timeline.log" 2>&1
echo "layer timeline rc $?" >> "$S"; grep -v -i warn "$OUT/layer-timeline.log" | head -30 >> "$S"
wait; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) vsa bench attention, forward and backward, with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 200 vsa bench --case wan2.1-1.3b-480p --case synthetic-49k --case synthetic-b2-16k \
  --backends vsa,fastvideo-tk,fastvideo-triton --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -30 >> "$S"
rm -rf "$OUT/attention" "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
