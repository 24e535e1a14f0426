#!/usr/bin/env bash
# Session 39: main with fwd-lazy-rescale and coarse-score-range landed (merged/commit.txt), prebuilt
# with nvcc 13.0 for sm_90a: the whole C++ GPU suite on the default kernels, the portable ones and
# Hopper v1's forward, then the forward and the coarse stage timed once on Wan 480p and H16.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/merged-summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: main $(cat .gpubin/merged/commit.txt)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } > "$S" 2>&1
for b in tests kb; do gunzip -c .gpubin/merged/$b.gz > /tmp/m-$b && chmod +x /tmp/m-$b; done
for kernel in default sm80 sm90v1; do
  filter='*'; [[ $kernel == sm90v1 ]] && filter='*Forward*:*Layer*'
  env $([[ $kernel == default ]] || echo VSA_CUDA_KERNEL=$kernel) timeout 200 /tmp/m-tests --gtest_filter="$filter" > "$OUT/merged-tests-$kernel.log" 2>&1
  echo "$kernel: rc $? ($((SECONDS - start)) s)" >> "$S"
  grep -E "^\[  PASSED|^\[  FAILED|FAILED  \]|SKIPPED \]" "$OUT/merged-tests-$kernel.log" | head -12 >> "$S"
done
for KB in "12 624 63 128 64 2 1 8" "16 768 64 128 64 0 1 8" "12 624 63 128 64 2 4 1" "24 2160 192 128 64 4 4 1"; do
  echo "$(date -u +%T) $KB: $(timeout 60 /tmp/m-kb $KB 2>&1 | tail -n 1)" >> "$S"
done
echo "== done ($((SECONDS - start)) s)" >> "$S"
