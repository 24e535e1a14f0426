#!/usr/bin/env bash
# Session 35, call 9 (main 7015ffa's kernel bench, prebuilt): where the Hopper backward's warps
# wait, instruction by instruction, for later sessions. Nsight Compute's stall sampling on one key
# pass and one dQ pass launch of H16 NK768 top-192 (the first group of the stored-dS path, after
# the warm-up), clocks as found, caches warm; the source pages as SASS, as CSV.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: main 7015ffa"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
gunzip -c .gpubin/bin/kb-main.gz > /tmp/kb-main && chmod +x /tmp/kb-main
for kernel in bwd_kernel bwd_dq_stored_kernel; do
  timeout 200 ncu --clock-control none --cache-control none --kernel-name "regex:$kernel" --launch-skip 30 \
    --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --import-source no -o "/tmp/$kernel" /tmp/kb-main 16 768 192 128 64 0 2 1 > "$OUT/ncu-$kernel.log" 2>&1
  echo "ncu $kernel: rc $? ($((SECONDS - start)) s)" >> "$S"
  ncu -i "/tmp/$kernel.ncu-rep" --page details >> "$OUT/ncu-$kernel.log" 2>&1
  ncu -i "/tmp/$kernel.ncu-rep" --page source --print-source sass --csv > "$OUT/sass-$kernel.csv" 2>&1
  grep -E "Duration|SM Frequency|Warp Cycles Per Issued|Eligible Warps|No Eligible|L2 Cache Throughput" "$OUT/ncu-$kernel.log" >> "$S"
done
echo "== done ($((SECONDS - start)) s)" >> "$S"
