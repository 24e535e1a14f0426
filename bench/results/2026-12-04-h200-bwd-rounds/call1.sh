#!/usr/bin/env bash
# Session 37, call 5 (main, kernels unchanged since 2ac62f4/7015ffa): issue 10's three backward
# cases nearest its line (H16 top-k 64, B2 H12 top-k 32, H16 top-k 192), three rounds of `vsa bench`
# beside both FastVideo kernels in one run, so that the ratio's spread within one GPU and one run
# is on record; then the portable backward (VSA_CUDA_KERNEL=sm80, main's kernel bench prebuilt in
# .gpubin/bin) beside dense FA2's backward. Predicted: docs/kernel-notes.md, "Issue 10's ratios in
# three rounds of one run".
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: $COMMIT"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
tk=$!
( VSA_COMMIT=$COMMIT OUT=/tmp/gpu-out bash scripts/gpu.sh python > /tmp/vsa-build.log 2>&1; echo "vsa build rc $?" >> /tmp/vsa-build.log ) &
build=$!
gunzip -c .gpubin/bin/kb-main.gz > /tmp/kb-main && chmod +x /tmp/kb-main
wait $build; tail -n 1 /tmp/vsa-build.log >> "$S"; grep -E "FAILED" /tmp/gpu-out/summary.txt >> "$S"
wait $tk; tail -n 1 /tmp/tk-build.log >> "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
for r in 1 2 3; do
  echo "== $(date -u +%T) round $r: vsa bench with FastVideo ($((SECONDS - start)) s)" >> "$S"
  PYTHONPATH=$PEERS timeout 150 vsa bench --case synthetic-49k --case synthetic-b2-16k --case synthetic-49k-top192 \
    --backends vsa,fastvideo-tk,fastvideo-triton --iters 20 > "$OUT/attention-round$r.log" 2>&1
  echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|best FastVideo|^[a-z].*synthetic" "$OUT/attention-round$r.log" >> "$S"
done
echo "== $(date -u +%T) portable backward and dense FA2's ($((SECONDS - start)) s)" >> "$S"
for case in "12 624 63 128 64 2 2 8" "16 768 64 128 64 0 2 8"; do
  echo "$(date -u +%T) sm80 $case: $(VSA_CUDA_KERNEL=sm80 timeout 60 /tmp/kb-main $case 2>&1 | tail -n 1)" >> "$S"
done
timeout 60 python3 bench/results/2026-12-02-h200-portable-bwd/fa2_dense_bwd_time.py >> "$S" 2>&1
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
