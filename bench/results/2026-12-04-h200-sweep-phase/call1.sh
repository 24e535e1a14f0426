#!/usr/bin/env bash
# Session 33, call 1 (a prebuilt binary, built off the device with nvcc 13.0 for sm_90a and carried
# in .gpubin/bin): `rot`, branch fwd-sweep-phase. Its forward v2 starts each CTA's list walk at
# entry (L mod R) * count / R, L the CTA's linear index, R = VSA_FWD_PHASE (default SMs * 4, the
# CTAs resident at once; 0 = list order, main's walk), wrapping around; its kernel bench keeps the
# random lists unsorted when VSA_BENCH_SHUFFLED is set. Question: does the HunyuanVideo-sized
# forward (K/V 69 MB a head, more than L2) lose to DRAM because the resident CTAs walk their
# sorted lists out of phase, and does a phase by launch position bring their K/V reads together?
# Predicted (docs/kernel-notes.md, "The list walk's phase"): H8 NK2160 top-216 −8 to −15 % with
# R = 528 against 0 and its DRAM reads down by more than half; NK768 and Wan level (±1 %); the
# shuffled lists no faster than sorted at R = 0.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
gunzip -c .gpubin/bin/kb-rot.gz > /tmp/kb-rot && chmod +x /tmp/kb-rot
run() {  # label, env settings..., then the kernel bench's arguments
  local label=$1; shift
  echo "$(date -u +%T) $label: $(env "$@" timeout 60 /tmp/kb-rot $KB 2>&1 | tail -n 1)" >> "$S"
}
for r in 1 2; do
  for KB in "8 2160 216 128 64 0 1 2" "24 768 216 128 64 0 1 2" "12 624 63 128 64 2 1 8"; do
    run "R=0   sorted   $KB" VSA_FWD_PHASE=0
    run "R=528 sorted   $KB" VSA_FWD_PHASE=528
    if [ "${KB%% *}" = 8 ]; then
      run "R=0   shuffled $KB" VSA_FWD_PHASE=0 VSA_BENCH_SHUFFLED=1
      run "R=528 shuffled $KB" VSA_FWD_PHASE=528 VSA_BENCH_SHUFFLED=1
      run "R=264 sorted   $KB" VSA_FWD_PHASE=264
      run "R=1056 sorted  $KB" VSA_FWD_PHASE=1056
    fi
  done
done
echo "== $(date -u +%T) Nsight Compute: one forward of H8 NK2160 top-216 and of H24 NK768, R = 0 and 528" >> "$S"
for KB in "8 2160 216 128 64 0 1 1" "24 768 216 128 64 0 1 1"; do
  for R in 0 528; do
    VSA_FWD_PHASE=$R timeout 60 ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed \
      --csv --print-units base -k regex:fwd_tma --launch-count 1 /tmp/kb-rot $KB > "$OUT/ncu-R$R-${KB%% *}.csv" 2>&1
    echo "ncu R=$R $KB rc $?: $(grep -E 'dram__bytes_read|hit_rate|duration' "$OUT/ncu-R$R-${KB%% *}.csv" | awk -F'","' '{print $(NF-2), $NF}' | tr -d '"' | tr '\n' ' ')" >> "$S"
  done
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
