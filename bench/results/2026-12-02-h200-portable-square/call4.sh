#!/usr/bin/env bash
# Session 18, call 4 (the landed tree, with the session's last 278 device seconds): where the
# portable key pass with 32 × 32 warp tiles waits. Nsight Compute, every section and the stall
# samples per SASS line, on one launch of it (VSA_CUDA_KERNEL=sm80, Wan 480p shape, atomic dQ).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary-main.txt"
{ echo "commit: $COMMIT"; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > "$S"
cmake -S . -B build/gpu -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest \
  > "$OUT/build.log" 2>&1 && ninja -C build/gpu vsa_kernel_bench >> "$OUT/build.log" 2>&1
echo "== $(date -u +%T) build rc $? ($((SECONDS - start)) s)" >> "$S"
kb=build/gpu/bench/kernel/vsa_kernel_bench
VSA_CUDA_KERNEL=sm80 timeout 100 ncu --clock-control none -k "regex:^bwd_kernel" --launch-skip 2 --launch-count 1 \
  --set full --import-source yes -o "$OUT/sm80" $kb 12 624 63 128 64 2 2 > "$OUT/ncu-sm80.log" 2>&1
echo "== $(date -u +%T) ncu rc $?" >> "$S"
ncu --import "$OUT/sm80.ncu-rep" --page details --print-details all > "$OUT/details-sm80.log" 2>&1
ncu --import "$OUT/sm80.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip > "$OUT/sass-sm80.csv.gz"
grep -E "Duration|Issue Slots Busy|Executed Ipc Active|Warp Cycles Per Issued|No Eligible|Executed Instructions  |Stall|Pipe Tensor Cycles|Lsu Wavefronts" \
  "$OUT/details-sm80.log" | head -60 >> "$S"
rm -f "$OUT/build.log" "$OUT"/*.ncu-rep "$OUT/ncu-sm80.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
