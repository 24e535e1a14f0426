#!/usr/bin/env bash
# Session 36, call 2: call 1's probe runs failed on an argument-count check (only the `same` run
# ran); the mended probe (kv_floor_probe.cu, now also on a persistent grid), prebuilt with nvcc 13.0
# for sm_90a into .gpubin/bin, on the same six cases. Call 1's `vsa bench` gives the goal times.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: $COMMIT"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
gunzip -c .gpubin/bin/kv_floor_probe.gz > /tmp/probe && chmod +x /tmp/probe
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
P="$OUT/probe.log"
for args in "12 624 63 21 30 52 0" "12 624 63 0 0 0 0" "16 768 64 0 0 0 0" "16 768 192 0 0 0 0" \
            "24 2160 216 33 45 80 132" "12 624 63 21 30 52 0 same"; do
  echo "$(date -u +%T) probe $args" >> "$P"
  timeout 150 /tmp/probe $args >> "$P" 2>&1; echo "rc $?" >> "$P"
done
kill $smi 2>/dev/null
grep -E "probe|GB|rc" "$P" >> "$S"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
