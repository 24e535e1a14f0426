#!/usr/bin/env bash
# Session 36, call 6: the probe (prebuilt with nvcc 13.0 for sm_90a into .gpubin/bin) with the
# union walks of 2 and 4 query tiles' lists (`groups`), whole tiles, on H16 top-k 64 and 192 and
# Wan 480p. Predicted: docs/kernel-notes.md, "The floor with a K/V tile read once for a CTA's
# query tiles".
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: $COMMIT"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
gunzip -c .gpubin/bin/kv_floor_probe.gz > /tmp/probe && chmod +x /tmp/probe
P="$OUT/probe.log"
for args in "16 768 64 0 0 0 0 whole" "16 768 192 0 0 0 0 whole" "12 624 63 21 30 52 0 whole"; do
  echo "$(date -u +%T) probe $args quick groups" >> "$P"
  timeout 150 /tmp/probe $args quick groups >> "$P" 2>&1; echo "rc $?" >> "$P"
done
cat "$P" >> "$S"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
