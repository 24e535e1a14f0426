#!/usr/bin/env bash
# Session 26, call 6 (the session's last ~250 device seconds): main (7cb69ff's kernels), the
# stored-dS path's group size. Call 5's profile showed H16 S49152 top-192 running its key and
# dQ passes in six groups of (3, 3, 3, 3, 3, 1) heads (the 4 GB cap on the dSᵀ tiles: 1.18 GB a
# head), each with its own partial last wave. The same backward with the cap at 4, 8 and 20 GB
# (6, 3 and 1 groups) in turn, two rounds; H16 top-64 at 4 and 8 GB (2 groups and 1).
# Predicted before the call: top-192 −2 to −4 % with one group, about half that with three.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
kb=build/gpu/bench/kernel/vsa_kernel_bench
echo "== $(date -u +%T) the dS cap, 8 calls a timing, in turn, two rounds" >> "$S"
for r in 1 2; do
  for mb in 4096 8192 20480; do
    echo "cap $mb MB, top-192: $(VSA_CUDA_DS_WORKSPACE_MB=$mb timeout 40 $kb 16 768 192 128 64 0 2 8 2>&1 | tail -n 1)" >> "$S"
  done
  for mb in 4096 8192; do
    echo "cap $mb MB, top-64: $(VSA_CUDA_DS_WORKSPACE_MB=$mb timeout 40 $kb 16 768 64 128 64 0 2 8 2>&1 | tail -n 1)" >> "$S"
  done
done
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
