#!/usr/bin/env bash
# Session 37, call 4 (prebuilt with nvcc 13.0 for sm_90a into .gpubin/bin: main's kernel bench and
# branch fwd-union-pool fb84d1b's kernel bench built with -DVSA_UNION_PROFILE, whose forward v2
# sums each warp's cycles by part). Forward v2's profile on the four shapes, each beside main's
# timing of the same shape (the profile's cost). Predicted: docs/kernel-notes.md, "Where forward
# v2's warps wait, by clock".
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commits: branch fb84d1b (kb-v2prof)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
for b in kb-main kb-v2prof; do gunzip -c .gpubin/bin/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
for KB in "16 768 64 128 64 0 1 4" "16 768 192 128 64 0 1 2" "24 256 32 128 64 0 1 8" "12 624 63 128 64 2 1 8"; do
  echo "-- $(date -u +%T) $KB" >> "$S"
  echo "main: $(timeout 60 /tmp/kb-main $KB 2>&1 | tail -n 1)" >> "$S"
  timeout 60 /tmp/kb-v2prof $KB > "$OUT/prof.tmp" 2>&1
  grep "v2 profile" "$OUT/prof.tmp" | tail -n 2 >> "$S"; echo "profile build: $(tail -n 1 "$OUT/prof.tmp")" >> "$S"
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
