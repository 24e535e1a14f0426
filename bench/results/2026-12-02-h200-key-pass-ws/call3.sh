#!/usr/bin/env bash
# Session 16, call 3 (main): where the key pass's L2 work goes. Nsight Compute on one launch of
# the key pass on the Wan shape, with the dQ reductions (atomic path, only=2) and without them
# (deterministic path, only=3: no dQ product, no reduction), L2 sectors by operation and the L2
# sub-units' utilization.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
kb=build/gpu/bench/kernel/vsa_kernel_bench
m=gpu__time_duration.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_red.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_atom.sum
m=$m,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__t_tag_requests.avg.pct_of_peak_sustained_elapsed
m=$m,lts__d_sectors.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex.avg.pct_of_peak_sustained_elapsed
m=$m,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
m=$m,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__average_t_sector_hit_rate_realtime.pct
for only in 2 3; do
  echo "== $(date -u +%T) ncu key pass, Wan shape, only=$only" >> "$S"
  timeout 120 ncu --clock-control none -k "regex:^bwd_kernel" --launch-skip 2 --launch-count 1 --metrics "$m" \
    $kb 12 624 63 128 64 2 "$only" > "$OUT/ncu-$only.log" 2>&1; echo "ncu rc $?" >> "$S"
  grep -E "bwd_kernel|gpu__|lts__|sm__|dram__" "$OUT/ncu-$only.log" >> "$S"
done
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
