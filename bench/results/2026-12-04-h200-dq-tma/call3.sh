#!/usr/bin/env bash
# Session 32, call 3: main's kernels (a6ecd32; the Hopper kernels of 5302ebb) beside FastVideo.
# (1) Power and SM clock of each backend's run on H16 top-k 192, one backend at a time (vsa,
# ThunderKittens, Triton; 100 timed runs each, forward and backward), with the SM clock and
# board power sampled every 100 ms between time markers: is FastVideo's backward under the
# ~700 W cap as vsa's is (1.47–1.52 GHz at 692 W in call 2)? (2) `vsa bench` on the five cases
# with both FastVideo kernels in one run: a fresh same-run sample of the backward ratios.
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
wait $tk; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T.%N | cut -c1-12) power by backend, H16 top-k 192, 100 timed runs each" >> "$S"
for b in vsa fastvideo-tk fastvideo-triton; do
  echo "$(date -u +%T.%N | cut -c1-12) start $b" >> "$S"
  PYTHONPATH=$PEERS timeout 120 vsa bench --case synthetic-49k-top192 --backends $b --iters 100 > "$OUT/power-$b.log" 2>&1
  echo "$(date -u +%T.%N | cut -c1-12) end $b rc $?: $(grep -E "^  $b" "$OUT/power-$b.log" | head -1)" >> "$S"
  sleep 3
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
