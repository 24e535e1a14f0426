#!/usr/bin/env bash
# Session 32, call 5: main (a6ecd32's kernels). vsa's B2 backward took 2.404 ms in call 3's
# `vsa bench` against 2.217–2.352 in earlier runs, while Triton's held at 3.18–3.22: is it the
# device (each call may get another H200; its UUID is logged here) or the run? B2 alone twice
# (vsa and Triton), then the five cases with both FastVideo kernels once more; SM clock and
# power every 100 ms.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 100 > "$OUT/smi.log" 2>&1 &
smi=$!
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
tk=$!
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
nvidia-smi --query-gpu=uuid,serial,pci.bus_id,power.limit,power.max_limit --format=csv >> "$S" 2>&1
wait $tk; tail -n 1 /tmp/tk-build.log >> "$S"
for r in 1 2; do
  echo "$(date -u +%T) B2 alone, round $r" >> "$S"
  PYTHONPATH=$PEERS timeout 60 vsa bench --case synthetic-b2-16k --backends vsa,fastvideo-triton --iters 20 > "$OUT/b2-$r.log" 2>&1
  grep -E "^  (vsa|fastvideo)|best FastVideo" "$OUT/b2-$r.log" >> "$S"
done
echo "== $(date -u +%T) vsa bench attention with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout $((585 - (SECONDS - start))) vsa bench --case wan2.1-1.3b-480p --case synthetic-49k \
  --case synthetic-b2-16k --case synthetic-49k-top192 --case hunyuan-720p --backends vsa,fastvideo-tk,fastvideo-triton \
  --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -40 >> "$S"
rm -rf "$OUT/attention"
kill $smi 2>/dev/null
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
