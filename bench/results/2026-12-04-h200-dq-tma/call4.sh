#!/usr/bin/env bash
# Session 32, call 4: main (a6ecd32), the forward beside ThunderKittens and dense cuDNN in one
# run (`vsa bench --no-backward`), on the three 64-token cases whose 1.25× ThunderKittens goal
# (issue 11) would put a sparse forward above dense attention's efficiency: Wan 480p, H16
# top-k 192, HunyuanVideo 720p; SM clock and power sampled every 100 ms.
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
echo "== $(date -u +%T) vsa bench forward: vsa, ThunderKittens, dense cuDNN" >> "$S"
PYTHONPATH=$PEERS timeout $((585 - (SECONDS - start))) vsa bench --case wan2.1-1.3b-480p --case synthetic-49k-top192 \
  --case hunyuan-720p --backends vsa,fastvideo-tk,dense-cudnn --no-backward --iters 20 > "$OUT/forward.log" 2>&1
echo "forward rc $?" >> "$S"; grep -vE "^\[" "$OUT/forward.log" | head -40 >> "$S"
kill $smi 2>/dev/null
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
