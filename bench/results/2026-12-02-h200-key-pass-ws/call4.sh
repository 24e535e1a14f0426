#!/usr/bin/env bash
# Session 16, call 4 (main): which L2 unit is at 82 % in the atomic key pass (call 3: sectors
# 49 %, tags 38 %, yet lts__throughput 82 %): ncu's breakdown of lts__throughput, with and
# without the dQ reductions, on the Wan shape.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
kb=build/gpu/bench/kernel/vsa_kernel_bench
for only in 2 3; do
  echo "== $(date -u +%T) ncu key pass, Wan shape, only=$only: breakdown of lts__throughput" >> "$S"
  timeout 120 ncu --clock-control none -k "regex:^bwd_kernel" --launch-skip 2 --launch-count 1 \
    --metrics "breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum" \
    $kb 12 624 63 128 64 2 "$only" > "$OUT/ncu-$only.log" 2>&1; echo "ncu rc $?" >> "$S"
  grep -E "bwd_kernel|gpu__|lts__|ltc" "$OUT/ncu-$only.log" | sort -k3 -n -r >> "$S"
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
