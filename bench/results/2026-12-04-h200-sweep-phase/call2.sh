#!/usr/bin/env bash
# Session 33, call 2 (prebuilt binaries, nvcc 13.0 for sm_90a, carried in .gpubin/bin): `wp`, branch
# walk-phase: the list walk's phase as it would land (list_walk.cuh), in forward v2 and the Hopper
# dQ pass, on by default where one (batch, kv head)'s re-read rows exceed half of L2 (the
# forward's K and V, the dQ pass's K), VSA_CUDA_WALK_PHASE=off|on|<SMs> to override. Tests: every
# C++ GPU test (with the new phased sweep at its default 40 cases), the phased sweep at 400 cases,
# memcheck of 16 phased cases. Then, two rounds, default against the override: the
# HunyuanVideo-sized forward and backward (H8 NK2160 top-216, phased by default), H16 top-192 and
# Wan's backward (not phased by default; `on` times what phasing their dQ pass would do); the dQ
# pass under Nsight Compute, phased and not.
# Predicted (docs/kernel-notes.md, "The list walk's phase"): the forward −9 to −12 % (call 1:
# −10.7 %); the H8 NK2160 backward −2 to −5 % (its dQ pass −8 to −15 %, K's DRAM reads down);
# top-192's backward with `on` −0.5 to +1 % (its K slice fits L2; fewer of its K reads from DRAM,
# against every CTA reading one window at once); Wan level.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
gunzip -c .gpubin/bin/kb-wp.gz > /tmp/kb && chmod +x /tmp/kb
gunzip -c .gpubin/bin/tests-wp.gz > /tmp/tests && chmod +x /tmp/tests
timeout 150 /tmp/tests --gtest_brief=1 > "$OUT/tests.log" 2>&1
echo "C++ GPU tests, default kernels: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure|CudaSweep" "$OUT/tests.log" | head -12 >> "$S"
VSA_GPU_SWEEP_CASES=400 timeout 120 /tmp/tests --gtest_filter='CudaSweep.PhasedListWalks*' > "$OUT/sweep-phased.log" 2>&1
echo "phased sweep, 400 cases: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|CudaSweep|Failure" "$OUT/sweep-phased.log" | head -6 >> "$S"
VSA_GPU_SWEEP_CASES=16 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 /tmp/tests \
  --gtest_filter='CudaSweep.PhasedListWalks*' --gtest_brief=1 > "$OUT/memcheck-phased.log" 2>&1
echo "memcheck, 16 phased cases: rc $? ($((SECONDS - start)) s)" >> "$S"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck-phased.log" | head -4 >> "$S"
run() {  # label, env settings..., then the kernel bench's arguments in KB
  local label=$1; shift
  echo "$(date -u +%T) $label $KB: $(env "$@" timeout 60 /tmp/kb $KB 2>&1 | tail -n 1)" >> "$S"
}
echo "== $(date -u +%T) timings" >> "$S"
for r in 1 2; do
  KB="8 2160 216 128 64 0 1 2"; run "fwd default" VSA_DUMMY=1; run "fwd off    " VSA_CUDA_WALK_PHASE=off
  KB="8 2160 216 128 64 0 2 2"; run "bwd default" VSA_DUMMY=1; run "bwd off    " VSA_CUDA_WALK_PHASE=off
  KB="16 768 192 128 64 0 2 4"; run "bwd default" VSA_DUMMY=1; run "bwd on     " VSA_CUDA_WALK_PHASE=on
  KB="12 624 63 128 64 3 2 8";  run "bwd default" VSA_DUMMY=1; run "bwd on     " VSA_CUDA_WALK_PHASE=on
done
echo "== $(date -u +%T) Nsight Compute: one dQ pass launch (the first group's)" >> "$S"
for KB in "8 2160 216 128 64 0 2 1" "16 768 192 128 64 0 2 1"; do
  for W in off on; do
    VSA_CUDA_WALK_PHASE=$W timeout 60 ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,lts__throughput.avg.pct_of_peak_sustained_elapsed \
      --csv --print-units base -k regex:dq_stored --launch-count 1 /tmp/kb $KB > "$OUT/ncu-dq-$W-${KB%% *}.csv" 2>&1
    echo "ncu $W $KB rc $?: $(grep -E 'dram__bytes_read|hit_rate|duration|lts__throughput' "$OUT/ncu-dq-$W-${KB%% *}.csv" | awk -F'","' '{print $(NF-2), $NF}' | tr -d '"' | tr '\n' ' ')" >> "$S"
  done
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
