#!/usr/bin/env bash
# Session 13, call 2: vsa beside FastVideo (TK + Triton) in the same run: attention (fwd+bwd) and the layer.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/.peers/fv_py
( python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
python3 -c "import vsa._C" 2>/dev/null && echo "package already built (warm machine)" > "$OUT/summary.txt" || VSA_COMMIT=$COMMIT bash scripts/gpu.sh python
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
wait; tail -n 2 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) vsa bench attention with peers" >> "$S"
timeout 300 vsa bench --case wan2.1-1.3b-480p,synthetic-49k,synthetic-49k-top192,synthetic-b2-16k \
  --backends vsa,vsa-rows,fastvideo-tk,fastvideo-triton --iters 30 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"
echo "== $(date -u +%T) vsa bench layer with peers" >> "$S"
timeout 150 vsa bench --op layer --case wan2.1-1.3b-480p --backends vsa,vsa-fine,fastvideo-tk --iters 30 \
  --out "$OUT/layer" > "$OUT/layer.log" 2>&1
echo "layer rc $?" >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
