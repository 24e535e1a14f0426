#!/usr/bin/env bash
# Session 26, call 5 (the session's last ~400 device seconds): main (7cb69ff's kernels) profiled
# for the next session: the merged key pass on the Wan tiling (every section and the stall
# samples per SASS line), and the backward's two passes on H16 S49152 top-192 (the case still
# short of 1.4×). No prediction: a measurement for the next changes.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
kb=build/gpu/bench/kernel/vsa_kernel_bench
echo "== $(date -u +%T) the key pass in full (Wan tiling)" >> "$S"
timeout 60 ncu --clock-control none -k "regex:^bwd_kernel" --launch-skip 2 --launch-count 1 --set full \
  --import-source yes -o "$OUT/bwd" $kb 12 624 63 128 64 2 2 > "$OUT/profile.log" 2>&1
ncu --import "$OUT/bwd.ncu-rep" --page details >> "$OUT/profile.log" 2>&1
ncu --import "$OUT/bwd.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip > "$OUT/bwd-sass.csv.gz"
rm -f "$OUT/bwd.ncu-rep" "$OUT/build.log"
grep -E "Duration|Issue Slots|Elapsed Cycles|SM Frequency|Issued Instructions  " "$OUT/profile.log" | head -8 >> "$S"
echo "== $(date -u +%T) the backward's passes, H16 S49152 top-192" >> "$S"
timeout 60 ncu --clock-control none -k "regex:^bwd_kernel|^bwd_dq_stored" --launch-skip 2 --launch-count 2 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats \
  --section Occupancy $kb 16 768 192 128 64 0 2 > "$OUT/profile-top192.log" 2>&1
grep -E "^  [a-z_]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput" \
  "$OUT/profile-top192.log" | head -20 >> "$S"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
