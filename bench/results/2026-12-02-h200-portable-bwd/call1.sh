#!/usr/bin/env bash
# Session 17, call 1 (main): what bounds the portable backward's key pass. Its time on the Wan
# shape, then Nsight Compute (every section, stall samples per SASS line) on one launch of it
# (VSA_CUDA_KERNEL=sm80, atomic dQ), and on one launch of dense FA2's backward kernel (torch SDPA,
# flash backend, B1 H12 S8192 D128), the efficiency the portable backward is measured against.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
kb=build/gpu/bench/kernel/vsa_kernel_bench
d=bench/results/2026-12-02-h200-portable-bwd
for r in 1 2; do
  echo "sm80 Wan bwd: $(VSA_CUDA_KERNEL=sm80 timeout 60 $kb 12 624 63 128 64 2 2 2>&1 | tail -n 2 | tr '\n' ' ')" >> "$S"
done
echo "== $(date -u +%T) ncu, portable key pass, Wan shape, one launch" >> "$S"
VSA_CUDA_KERNEL=sm80 timeout 200 ncu --clock-control none -k "regex:^bwd_kernel" --launch-skip 2 --launch-count 1 \
  --set full --import-source yes -o "$OUT/sm80" $kb 12 624 63 128 64 2 2 > "$OUT/ncu-sm80.log" 2>&1
echo "ncu rc $?" >> "$S"
ncu --import "$OUT/sm80.ncu-rep" --page details --print-details all > "$OUT/details-sm80.log" 2>&1
ncu --import "$OUT/sm80.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip > "$OUT/sass-sm80.csv.gz"
echo "== $(date -u +%T) ncu, dense FA2 backward (torch SDPA flash), B1 H12 S8192 D128" >> "$S"
timeout 200 ncu --clock-control none --target-processes all -k "regex:flash_bwd_dq_dk_dv" --launch-skip 2 --launch-count 1 \
  --set full -o "$OUT/fa2" python3 $d/fa2_dense_bwd.py > "$OUT/ncu-fa2.log" 2>&1
echo "ncu rc $?" >> "$S"
ncu --import "$OUT/fa2.ncu-rep" --page details --print-details all > "$OUT/details-fa2.log" 2>&1
for k in sm80 fa2; do
  echo "-- $k" >> "$S"
  grep -E "^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|Issue Slots Busy|Executed Ipc Active|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|No Eligible|Active Warps Per|Executed Instructions  |Shared Memory Configuration|Block Size|Threads  " \
    "$OUT/details-$k.log" | head -40 >> "$S"
done
tail -5 "$OUT/ncu-fa2.log" >> "$S"
rm -f "$OUT/build.log" "$OUT"/*.ncu-rep "$OUT/ncu-sm80.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
