#!/usr/bin/env bash
# Session 33, call 5 (prebuilt binaries, nvcc 13.0 for sm_90a, in .gpubin/bin): `s80`, branch
# sm80-walk-phase (main cd69aac + the portable forward walking its list through ListWalk, the next
# tile carried and advanced by after(), spill-free at 255 registers), and `main` (5302ebb; the
# portable forward is unchanged from it to cd69aac). Tests: every C++ GPU test on the portable
# kernels (VSA_CUDA_KERNEL=sm80), the phased sweep at 400 cases there, memcheck of 8 phased cases.
# Then, VSA_CUDA_KERNEL=sm80, two rounds: Wan's forward at D 128 and 64, main against s80 (list
# order: must be level), and the HunyuanVideo-sized forward (H24 and H4, NK2160 top-216), s80 `on`
# against `off`. Predicted (docs/kernel-notes.md): Wan level (±1 %); H24 −8 to −14 %; H4 −0 to −3 %.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
for v in main s80; do gunzip -c .gpubin/bin/kb-$v.gz > /tmp/kb-$v && chmod +x /tmp/kb-$v; done
gunzip -c .gpubin/bin/tests-s80.gz > /tmp/tests && chmod +x /tmp/tests
export VSA_CUDA_KERNEL=sm80
timeout 150 /tmp/tests --gtest_brief=1 > "$OUT/tests-sm80.log" 2>&1
echo "C++ GPU tests, VSA_CUDA_KERNEL=sm80: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|Failure|CudaSweep" "$OUT/tests-sm80.log" | head -10 >> "$S"
VSA_GPU_SWEEP_CASES=400 timeout 100 /tmp/tests --gtest_filter='CudaSweep.Phased*' > "$OUT/sweep-phased-sm80.log" 2>&1
echo "phased sweep, 400 cases, sm80: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|CudaSweep|Failure" "$OUT/sweep-phased-sm80.log" | head -4 >> "$S"
VSA_GPU_SWEEP_CASES=8 timeout 80 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 /tmp/tests \
  --gtest_filter='CudaSweep.Phased*' --gtest_brief=1 > "$OUT/memcheck-phased-sm80.log" 2>&1
echo "memcheck, 8 phased cases, sm80: rc $? ($((SECONDS - start)) s)" >> "$S"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck-phased-sm80.log" | head -3 >> "$S"
echo "== $(date -u +%T) timings, VSA_CUDA_KERNEL=sm80" >> "$S"
for r in 1 2; do
  for KB in "12 624 63 128 64 2 1 8" "12 624 63 64 64 2 1 8"; do
    for v in main s80; do echo "$(date -u +%T) $v $KB: $(timeout 60 /tmp/kb-$v $KB 2>&1 | tail -n 1)" >> "$S"; done
  done
  for KB in "24 2160 216 128 64 0 1 1" "4 2160 216 128 64 0 1 2"; do
    for W in off on; do echo "$(date -u +%T) s80 $W $KB: $(VSA_CUDA_WALK_PHASE=$W timeout 60 /tmp/kb-s80 $KB 2>&1 | tail -n 1)" >> "$S"; done
  done
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
