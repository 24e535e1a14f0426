#!/usr/bin/env bash
# Session 36, call 1: the K/V bytes alone (kv_floor_probe.cu, prebuilt with nvcc 13.0 for sm_90a
# into .gpubin/bin) on the four 64-token forward cases, and `vsa bench --no-backward` beside
# ThunderKittens in the same call (main built on the device by `scripts/gpu.sh python`), so the
# goal times (0.80 of ThunderKittens') and the floors come from one run of one GPU.
# Predicted: docs/kernel-notes.md, "The K/V bytes alone".
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: $COMMIT"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
tk=$!
( VSA_COMMIT=$COMMIT OUT=/tmp/gpu-out bash scripts/gpu.sh python > /tmp/vsa-build.log 2>&1; echo "vsa build rc $?" >> /tmp/vsa-build.log ) &
build=$!
gunzip -c .gpubin/bin/kv_floor_probe.gz > /tmp/probe && chmod +x /tmp/probe
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
P="$OUT/probe.log"
echo "== $(date -u +%T) probe ($((SECONDS - start)) s)" >> "$S"
for args in "12 624 63 21 30 52 0" "12 624 63 0 0 0 0" "16 768 64 0 0 0 0" "16 768 192 0 0 0 0" \
            "24 2160 216 33 45 80 132" "12 624 63 21 30 52 0 same"; do
  echo "$(date -u +%T) probe $args" >> "$P"
  timeout 150 /tmp/probe $args >> "$P" 2>&1; echo "rc $?" >> "$P"
done
echo "== $(date -u +%T) probe done ($((SECONDS - start)) s)" >> "$S"
wait $build; tail -n 1 /tmp/vsa-build.log >> "$S"; grep -E "FAILED" /tmp/gpu-out/summary.txt >> "$S"
wait $tk; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) vsa bench forward with ThunderKittens ($((SECONDS - start)) s)" >> "$S"
PYTHONPATH=$PEERS timeout $((580 - (SECONDS - start))) vsa bench --case wan2.1-1.3b-480p --case synthetic-49k \
  --case synthetic-49k-top192 --case hunyuan-720p --backends vsa,fastvideo-tk --no-backward \
  --iters 20 > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|FastVideo|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -30 >> "$S"
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
