#!/usr/bin/env bash
# Session 35, call 4 (main 7015ffa's kernel bench, prebuilt, carried in .gpubin/bin): where forward
# v2's warps wait, instruction by instruction. Nsight Compute's stall sampling on one Wan forward
# launch (D128, blk64, the Wan key tiling) and one H16 NK768 top-64 launch, caches left warm
# (--cache-control none) and clocks as found; the source page as SASS with its samples, as CSV.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: main 7015ffa"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader
  ncu --version | tail -n 1; } > "$S" 2>&1
gunzip -c .gpubin/bin/kb-main.gz > /tmp/kb-main && chmod +x /tmp/kb-main
profile() {  # name, then the kernel bench's arguments
  local name=$1; shift
  timeout 200 ncu --clock-control none --cache-control none --kernel-name regex:fwd_tma_kernel --launch-skip 40 \
    --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --import-source no -o "/tmp/$name" /tmp/kb-main "$@" > "$OUT/ncu-$name.log" 2>&1
  echo "ncu $name: rc $? ($((SECONDS - start)) s)" >> "$S"
  ncu -i "/tmp/$name.ncu-rep" --page details >> "$OUT/ncu-$name.log" 2>&1
  ncu -i "/tmp/$name.ncu-rep" --page source --print-source sass --csv > "$OUT/sass-$name.csv" 2>&1
  echo "source page $name: rc $?, $(wc -l < "$OUT/sass-$name.csv") lines" >> "$S"
  grep -E "Duration|SM Frequency|Warp Cycles Per Issued|Eligible Warps|No Eligible|L2 Cache Throughput" "$OUT/ncu-$name.log" >> "$S"
}
profile wan 12 624 63 128 64 2 1 1
profile h16 16 768 64 128 64 0 1 1
echo "== done ($((SECONDS - start)) s)" >> "$S"
