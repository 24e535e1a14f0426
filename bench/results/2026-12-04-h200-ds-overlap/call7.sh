#!/usr/bin/env bash
# Session 35, call 7: main at the session's head (kernels as 7015ffa's; since then results, notes
# and README only), built on the device (`scripts/gpu.sh cpp python`), then `vsa bench` on the
# five cases beside both FastVideo kernels, forward and backward, as in session 34's call 2: one
# more same-run sample of the ratios, which moved by 2–3 % from run to run before.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
tk=$!
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary.txt"
nvidia-smi --query-gpu=uuid,power.limit --format=csv,noheader >> "$S" 2>&1
wait $tk; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) vsa bench attention with FastVideo ($((SECONDS - start)) s)" >> "$S"
PYTHONPATH=$PEERS timeout $((570 - (SECONDS - start))) vsa bench --case wan2.1-1.3b-480p --case synthetic-49k \
  --case synthetic-b2-16k --case synthetic-49k-top192 --case hunyuan-720p --backends vsa,fastvideo-tk,fastvideo-triton \
  --iters 20 > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|best FastVideo|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -40 >> "$S"
kill $smi 2>/dev/null
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
