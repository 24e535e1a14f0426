#!/usr/bin/env bash
# Session 35, call 5 (main 7015ffa's kernel bench, prebuilt): is call 4's Wan profile (38 % of
# the warps' samples waiting for K or V tiles, against ~2 % on H16) the partial tiles' boxes or
# the profiler's? One forward launch of the Wan shape profiled with its partial tiles (2) and
# with every block whole (0), each after 200 launches, and again after 40; the K/V full-barrier
# waits read from the source page.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: main 7015ffa"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
gunzip -c .gpubin/bin/kb-main.gz > /tmp/kb-main && chmod +x /tmp/kb-main
for skip in 200 40; do
  for partial in 2 0; do
    name=wan-p$partial-skip$skip
    timeout 150 ncu --clock-control none --cache-control none --kernel-name regex:fwd_tma_kernel --launch-skip $skip \
      --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SourceCounters --import-source no \
      -o "/tmp/$name" /tmp/kb-main 12 624 63 128 64 $partial 1 4 > "$OUT/ncu-$name.log" 2>&1
    echo "ncu $name: rc $? ($((SECONDS - start)) s)" >> "$S"
    ncu -i "/tmp/$name.ncu-rep" --page source --print-source sass --csv > "$OUT/sass-$name.csv" 2>&1
    ncu -i "/tmp/$name.ncu-rep" --page details | grep -E "Duration|SM Frequency|Warp Cycles Per Issued|L2 Cache Throughput" >> "$S"
  done
done
echo "== done ($((SECONDS - start)) s)" >> "$S"
