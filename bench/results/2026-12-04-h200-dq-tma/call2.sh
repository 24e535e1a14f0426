#!/usr/bin/env bash
# Session 32, call 2 (prebuilt main binary a6ecd32 = 5302ebb's kernels, .gpubin/bin/kb-main):
# how much the stored-dS backward pays a group. The key pass and the dQ pass run over groups of
# (batch, kv head) units whose dS tiles fit VSA_CUDA_DS_WORKSPACE_MB (default 4096: H16 top-192
# takes six groups of 3, 3, 3, 3, 3, 1 units, 1.2 GB a unit). Each cap below in turn, two
# rounds, 8 calls a timing: 4096 (six groups), 4950 (four of 4), 6144 (four: 5, 5, 5, 1), 8192
# (three: 6, 6, 4), 10240 (two of 8), 20480 (one); H16 top-64 (two groups by default: 10, 6)
# at 4096 and 8192 (one). Predicted: each group fewer −0.3 to −0.8 % (a launch's tail and
# its first wave), so one group −2 to −4 % against six.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary-main.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } > "$S" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
gunzip -c .gpubin/bin/kb-main.gz > /tmp/kb-main && chmod +x /tmp/kb-main
echo "== $(date -u +%T) the backward at each dS workspace cap (MB), 8 calls a timing" >> "$S"
for r in 1 2; do
  for mb in 4096 4950 6144 8192 10240 20480; do
    echo "$(date -u +%T) cap $mb 16 768 192: $(VSA_CUDA_DS_WORKSPACE_MB=$mb timeout 60 /tmp/kb-main 16 768 192 128 64 0 2 8 2>&1 | tail -n 1)" >> "$S"
  done
  for mb in 4096 8192; do
    echo "$(date -u +%T) cap $mb 16 768 64: $(VSA_CUDA_DS_WORKSPACE_MB=$mb timeout 60 /tmp/kb-main 16 768 64 128 64 0 2 8 2>&1 | tail -n 1)" >> "$S"
  done
done
echo "== $(date -u +%T) Nsight Compute: each launch of one top-192 backward at 4096 and 20480" >> "$S"
for mb in 4096 20480; do
  VSA_CUDA_DS_WORKSPACE_MB=$mb timeout 90 ncu --metrics gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_elapsed.avg \
    --csv --print-units base -k regex:bwd_ /tmp/kb-main 16 768 192 128 64 0 3 1 > "$OUT/ncu-launches-$mb.csv" 2>&1
  echo "ncu $mb rc $?" >> "$S"
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
