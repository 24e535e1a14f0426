#!/usr/bin/env bash
# Session 30, call 2: where call 1's +1.2 % of the portable backward with query padding comes
# from, and the portable backward beside dense FA2 in one device state. (1) Per-kernel times
# under Nsight Compute (its locked clocks) of one backward with query padding (Wan tiling,
# partial 3) and one without, main (8dacafc, .gpubin/main) and branch 1c2d410. (2) The portable
# backward and FA2's timed by one script (sustained_bwd.py), cold and after 5 s of load, in turn.
# (3) One more A/B round of call 1's portable shapes. SM clock and power sampled throughout.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
wait $(jobs -p | grep -v "^$smi$") 2>/dev/null; cat /tmp/main.rc >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) per-kernel times (ncu), portable backward" >> "$S"
for part in 3 2; do
  for v in main new; do
    VSA_CUDA_KERNEL=sm80 timeout 120 ncu --metrics gpu__time_duration.sum --csv --print-units base \
      -k regex:'bwd_kernel|delta_kernel|dq_finish_kernel|count_kernel|scan_kernel|place_kernel|order_kernel' \
      --launch-count 14 ${kbv[$v]} 12 624 63 128 64 $part 2 1 > "$OUT/ncu-$v-p$part.csv" 2>&1
    echo "partial $part $v: rc $?" >> "$S"
    grep gpu__time_duration "$OUT/ncu-$v-p$part.csv" | awk -F'","' '{print $5 "|" $NF}' |
      sed -E 's/\(vsa::cuda::[^|]*//; s/"$//' | awk -F'|' '{t[$1]+=$2; n[$1]++} END{for(k in t) printf "  %9.1f us  %s (x%d)\n", t[k]/n[k]/1000, k, n[k]}' | sort -rn >> "$S"
  done
done
echo "== $(date -u +%T) sustained_bwd.py: cold, then after 5 s of load" >> "$S"
T=bench/results/2026-12-04-h200-portable-stages/sustained_bwd.py
for w in 0 5; do
  VSA_CUDA_KERNEL=sm80 timeout 60 python3 $T vsa $w >> "$S" 2>&1
  timeout 90 python3 $T fa2 $w >> "$S" 2>&1
done
VSA_CUDA_KERNEL=sm80 timeout 60 python3 $T vsa 5 >> "$S" 2>&1
timeout 90 python3 $T fa2 5 >> "$S" 2>&1
echo "== $(date -u +%T) A/B, 8 calls a timing, portable: main, new in turn" >> "$S"
for case in "12 624 63 128 64 2 2 8" "12 624 63 128 64 3 2 8" "16 768 64 128 64 0 2 8"; do
  for v in main new; do
    echo "$(date -u +%T) sm80 $v $case: $(VSA_CUDA_KERNEL=sm80 timeout 60 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
  done
done
kill $smi 2>/dev/null
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
