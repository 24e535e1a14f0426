#!/usr/bin/env bash
# Session 36, call 4: the floors and the goals from one run of one GPU. The probe (prebuilt with
# nvcc 13.0 for sm_90a into .gpubin/bin, `quick`) on the four 64-token forward cases, partial
# tiles requested as v2 does and as real-row boxes; then main built on the device (`scripts/gpu.sh
# python`) and `vsa bench` on the five cases beside both FastVideo kernels, forward and backward
# (a further same-run sample of issue 10's ratios, which move by 2–3 % from run to run).
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
for args in "12 624 63 21 30 52 0 oob" "12 624 63 21 30 52 0 rows" "16 768 64 0 0 0 0 oob" "16 768 192 0 0 0 0 oob" \
            "24 2160 216 33 45 80 132 oob" "24 2160 216 33 45 80 132 rows"; do
  echo "$(date -u +%T) probe $args quick" >> "$P"
  timeout 100 /tmp/probe $args quick >> "$P" 2>&1; echo "rc $?" >> "$P"
done
echo "== $(date -u +%T) probe done ($((SECONDS - start)) s)" >> "$S"
wait $build; tail -n 1 /tmp/vsa-build.log >> "$S"; grep -E "FAILED" /tmp/gpu-out/summary.txt >> "$S"
wait $tk; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) vsa bench with FastVideo ($((SECONDS - start)) s)" >> "$S"
PYTHONPATH=$PEERS timeout $((580 - (SECONDS - start))) vsa bench --case wan2.1-1.3b-480p --case synthetic-49k \
  --case synthetic-b2-16k --case synthetic-49k-top192 --case hunyuan-720p --backends vsa,fastvideo-tk,fastvideo-triton \
  --iters 20 > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|best FastVideo|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -40 >> "$S"
kill $smi 2>/dev/null
grep -E "probe|GB| 6 CTAs| 2 CTAs/SM x 3| 3 CTAs/SM x 2| 4 CTAs" "$P" >> "$S"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
