#!/usr/bin/env bash
# Session 34, call 2: the ramp as it lands (forward v2 phases its list walks where a (batch, kv
# head)'s K and V exceed half of L2 and the launch is at least 8 resident waves, the phase grown
# over the first 8), built on the device: `scripts/gpu.sh cpp python ctest`, then `vsa bench` on
# the five cases beside both FastVideo kernels, and HunyuanVideo's forward again with
# VSA_CUDA_WALK_PHASE=off, then 132 (session 33's phase, from the first CTA), vsa alone.
# Predicted (docs/kernel-notes.md, "The ramp as it lands"): ctest all pass (689 + 2 new);
# HunyuanVideo's forward −14 to −17 % against `off` and −1 to −3 % against 132; 0.84–0.87 of
# ThunderKittens' time (0.873 in session 33's call 4); the other cases as before (not phased).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
tk=$!
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python ctest > /dev/null 2>&1
S="$OUT/summary.txt"
nvidia-smi --query-gpu=uuid,power.limit --format=csv,noheader >> "$S" 2>&1
wait $tk; tail -n 1 /tmp/tk-build.log >> "$S"
grep -E "CudaSweep|PASSED|FAILED" "$OUT/ctest.log" | head -10 >> "$S"
echo "== $(date -u +%T) vsa bench attention with FastVideo ($((SECONDS - start)) s)" >> "$S"
PYTHONPATH=$PEERS timeout $((460 - (SECONDS - start))) vsa bench --case wan2.1-1.3b-480p --case synthetic-49k \
  --case synthetic-b2-16k --case synthetic-49k-top192 --case hunyuan-720p --backends vsa,fastvideo-tk,fastvideo-triton \
  --iters 20 > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|best FastVideo|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -40 >> "$S"
for phase in off 132; do
  echo "== $(date -u +%T) HunyuanVideo forward, VSA_CUDA_WALK_PHASE=$phase, vsa alone ($((SECONDS - start)) s)" >> "$S"
  VSA_CUDA_WALK_PHASE=$phase timeout $((570 - (SECONDS - start))) vsa bench --case hunyuan-720p --backends vsa --no-backward \
    --iters 20 > "$OUT/hunyuan-$phase.log" 2>&1
  echo "rc $?" >> "$S"; grep -E "^  vsa" "$OUT/hunyuan-$phase.log" >> "$S"
done
echo "== $(date -u +%T) HunyuanVideo forward, default, vsa alone ($((SECONDS - start)) s)" >> "$S"
timeout $((590 - (SECONDS - start))) vsa bench --case hunyuan-720p --backends vsa --no-backward --iters 20 > "$OUT/hunyuan-default.log" 2>&1
echo "rc $?" >> "$S"; grep -E "^  vsa" "$OUT/hunyuan-default.log" >> "$S"
kill $smi 2>/dev/null
rm -f "$OUT/build.log"
gzip -f "$OUT/ctest.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
