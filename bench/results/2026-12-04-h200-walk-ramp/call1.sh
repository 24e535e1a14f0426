#!/usr/bin/env bash
# Session 34, call 1 (prebuilt binaries of ad98846, nvcc 13.0 for sm_90a, carried in .gpubin/bin):
# forward v2's phase grown over a launch's first 8 waves (walk_start.hpp), as it lands. Tests:
# every C++ GPU test (the new ramped long launch among them), the phased sweep at 400 cases,
# memcheck of the ramped launch and 16 phased sweep cases. Then the forward of NK2160 top-216
# (D128, blk64) at H1, H2, H4 and H24 (4, 8, 16 and 98 waves of 528 CTAs): `off`, `132` (the
# whole phase from the first CTA: session 33's phase) and `on` (the ramp; also the default from 8
# waves), two rounds where short.
# Predicted (docs/kernel-notes.md, "The ramp as it lands"): against off, H1 ramp −2 to +2 %, 132
# +10 %; H2 ramp −2 to −4 %, 132 +4 %; H4 ramp −5 to −7 %; H24 ramp −14 to −16 %, 132 −13 to −15 %.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
gunzip -c .gpubin/bin/kb-ramp.gz > /tmp/kb && chmod +x /tmp/kb
gunzip -c .gpubin/bin/tests-ramp.gz > /tmp/tests && chmod +x /tmp/tests
timeout 150 /tmp/tests --gtest_brief=1 > "$OUT/tests.log" 2>&1
echo "C++ GPU tests, default kernels: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure|CudaSweep" "$OUT/tests.log" | head -12 >> "$S"
VSA_GPU_SWEEP_CASES=400 timeout 120 /tmp/tests --gtest_filter='CudaSweep.PhasedListWalks*:CudaSweep.Ramped*' > "$OUT/sweep-phased.log" 2>&1
echo "phased sweep, 400 cases, and the ramped launch: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|CudaSweep|Failure" "$OUT/sweep-phased.log" | head -6 >> "$S"
VSA_GPU_SWEEP_CASES=16 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 /tmp/tests \
  --gtest_filter='CudaSweep.PhasedListWalks*:CudaSweep.Ramped*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck, the ramped launch and 16 phased cases: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -4 >> "$S"
run() {  # label, env settings..., then the kernel bench's arguments in KB
  local label=$1; shift
  echo "$(date -u +%T) $label $KB: $(env "$@" timeout 60 /tmp/kb $KB 2>&1 | tail -n 1)" >> "$S"
}
echo "== $(date -u +%T) timings ($((SECONDS - start)) s)" >> "$S"
for r in 1 2; do
  for KB in "1 2160 216 128 64 0 1 8" "2 2160 216 128 64 0 1 4" "4 2160 216 128 64 0 1 2"; do
    run "off    " VSA_CUDA_WALK_PHASE=off; run "132    " VSA_CUDA_WALK_PHASE=132; run "on     " VSA_CUDA_WALK_PHASE=on
  done
done
KB="24 2160 216 128 64 0 1 1"
run "off    " VSA_CUDA_WALK_PHASE=off; run "132    " VSA_CUDA_WALK_PHASE=132; run "on     " VSA_CUDA_WALK_PHASE=on
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
