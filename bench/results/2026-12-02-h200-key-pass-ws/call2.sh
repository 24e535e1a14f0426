#!/usr/bin/env bash
# Session 16, call 2 (branch key-pass-ws): the ws key pass with the exchange's barrier outside
# the consumers' branches (synccheck flagged two barrier instructions at different addresses):
# its backward suites, synccheck and racecheck again; then Nsight Compute on one launch of each
# key pass (default wg, ws) on the Wan shape: every section and the stall samples per SASS line.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
kb=build/gpu/bench/kernel/vsa_kernel_bench
echo "== $(date -u +%T) backward suites on ws" >> "$S"
VSA_CUDA_KEY_PASS=ws timeout 200 $t --gtest_filter='*CudaBackward*:CudaSweep.*Backward*:CudaFailedCall*' > "$OUT/ws-tests.log" 2>&1
echo "rc $?" >> "$S"; grep -E "^\[  PASSED|^\[  FAILED|tests ran" "$OUT/ws-tests.log" | head -10 >> "$S"
for tool in synccheck racecheck; do
  VSA_CUDA_KEY_PASS=ws timeout 100 compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 10 $t \
    --gtest_filter='Cases/CudaBackward.*d128*:DqPaths/*' --gtest_brief=1 > "$OUT/ws-$tool.log" 2>&1
  echo "$tool rc $?" >> "$S"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|tests ran|PASSED|FAILED" "$OUT/ws-$tool.log" | head -5 >> "$S"
done
for kp in wg ws; do
  echo "== $(date -u +%T) ncu, key pass $kp, Wan shape, one launch" >> "$S"
  VSA_CUDA_KEY_PASS=$kp timeout 150 ncu --clock-control none -k "regex:bwd_(ws_)?kernel" --launch-skip 2 --launch-count 1 \
    --set full --import-source yes -o "$OUT/bwd-$kp" $kb 12 624 63 128 64 2 2 > "$OUT/ncu-$kp.log" 2>&1
  echo "ncu rc $?" >> "$S"
  ncu --import "$OUT/bwd-$kp.ncu-rep" --page details > "$OUT/details-$kp.log" 2>&1
  ncu --import "$OUT/bwd-$kp.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip > "$OUT/sass-$kp.csv.gz"
  grep -E "^  [a-z_]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Issue Slots Busy|Executed Ipc Active|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|No Eligible|Active Warps Per" \
    "$OUT/details-$kp.log" >> "$S"
done
rm -f "$OUT/build.log" "$OUT"/*.ncu-rep
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
