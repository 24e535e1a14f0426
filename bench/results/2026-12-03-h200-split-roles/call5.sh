#!/usr/bin/env bash
# Session 22, call 5: is the key pass held by the power cap? Clocks and power while the Wan
# backward runs in vsa_kernel_bench's loop, and the SM clock Nsight Compute sees in one launch of
# the key pass, for main (8c71bea) and the split-role kernel (babfb50, .gpubin/split).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary-main.txt"
{ echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "commit: $COMMIT"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv,noheader; } > "$S"
for v in main split; do
  ( cmake -S .gpubin/$v -B /tmp/build-$v -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
      -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/$v-build.log 2>&1 &&
    ninja -C /tmp/build-$v vsa_kernel_bench >> /tmp/$v-build.log 2>&1; echo "$v build rc $?" > /tmp/$v.rc ) &
done
wait; cat /tmp/main.rc /tmp/split.rc >> "$S"
declare -A kb=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [split]=/tmp/build-split/bench/kernel/vsa_kernel_bench)
for v in main split; do
  for only in 2 1; do
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv,noheader -lms 50 \
      > /tmp/clk-$v-$only.csv 2>&1 &
    smi=$!
    r=$(timeout 60 ${kb[$v]} 12 624 63 128 64 2 $only 2>&1 | tail -n 1)
    kill $smi; wait $smi 2>/dev/null
    cp /tmp/clk-$v-$only.csv "$OUT/clocks-$v-$only.csv"
    echo "$v only=$only: $r" >> "$S"
    python3 - "/tmp/clk-$v-$only.csv" >> "$S" <<'PY'
import sys
rows = [l.split(', ') for l in open(sys.argv[1]) if l.count(',') >= 3]
busy = [r for r in rows if float(r[2].split()[0]) > 300]
if busy:
    mhz = sorted(int(r[1].split()[0]) for r in busy); w = sorted(float(r[2].split()[0]) for r in busy)
    reasons = sorted({r[3].strip() for r in busy})
    print(f"  samples>300W {len(busy)}: SM MHz min {mhz[0]} median {mhz[len(mhz)//2]} max {mhz[-1]}; "
          f"power median {w[len(w)//2]:.0f} W max {w[-1]:.0f} W; reasons {reasons}")
PY
  done
done
echo "== $(date -u +%T) key pass, one launch (Nsight Compute, clocks not locked)" >> "$S"
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,smsp__cycles_active.avg,smsp__inst_executed.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
for v in main split; do
  timeout 60 ncu --clock-control none -k "regex:^bwd_(split_)?kernel" --launch-skip 2 --launch-count 1 --metrics $M \
    ${kb[$v]} 12 624 63 128 64 2 2 2>&1 | grep -E "^  [a-z_ ].*bwd_|gpu__|smsp__|sm__" | sed "s/^/$v /" >> "$S"
  timeout 60 ncu --clock-control base -k "regex:^bwd_(split_)?kernel" --launch-skip 2 --launch-count 1 --metrics $M \
    ${kb[$v]} 12 624 63 128 64 2 2 2>&1 | grep -E "gpu__|sm__cycles_elapsed" | sed "s/^/$v (base clock) /" >> "$S"
done
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
