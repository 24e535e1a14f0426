#!/usr/bin/env bash
# Prepared in session 39 (main b343fdc's kernels), prebuilt with nvcc 13.0 for sm_90a into
# .gpubin/s39:
# - branch coarse-score-range: GPU tests (tests-coarse) and kernel bench (kb-coarse);
# - branch cuda-list-chunks: GPU tests (tests-chunks) and kernel bench (kb-chunks);
# - main (main-commit.txt; its kernels are b343fdc's) with the coarse-stage timing mode
#   cherry-picked (kb-main-coarse).
# 1. coarse-score-range: coarse, layer, block-mean and gate tests (lists bit-identical to the
#    CPU's, the new huge-mean cases among them); the coarse stage alone, main and branch in turn.
#    Predicted: docs/kernel-notes.md, "The coarse scores' range" (+1 to +3 %).
# 2. cuda-list-chunks: the backward suite on the default kernels and the portable ones, the
#    chunked-list cases, the 2.18e9-entry case (VSA_CUDA_LARGE_TESTS=1, ~26 GB); the backward
#    timed beside main's (one chunk: predicted level).
# Run from the checkout root with carry [".gpubin/s39"]. Copy to bench/results/<date>-h200-s39/call1.sh before running.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ
  echo "commits: main $(cat .gpubin/s39/main-commit.txt) (kernels of b343fdc), coarse-score-range $(cat .gpubin/s39/coarse-commit.txt), cuda-list-chunks $(cat .gpubin/s39/chunks-commit.txt)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
for b in kb-main-coarse kb-coarse tests-coarse kb-chunks tests-chunks; do gunzip -c .gpubin/s39/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
tests() {  # label, binary, VSA_CUDA_KERNEL (empty: the default), filter, timeout
  VSA_CUDA_KERNEL=$3 timeout $5 /tmp/$2 --gtest_filter="$4" > "$OUT/tests-$1.log" 2>&1
  echo "$1: rc $? ($((SECONDS - start)) s)" >> "$S"
  grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure|FAILED  \]" "$OUT/tests-$1.log" | head -10 >> "$S"
}
tests coarse tests-coarse "" '*Coarse*:*Layer*:*BlockMean*:*GateCombine*' 200
echo "== $(date -u +%T) coarse stage alone ($((SECONDS - start)) s)" >> "$S"
for r in 1 2 3; do
  for KB in "12 624 63 128 64 2 4 1" "24 2160 192 128 64 4 4 1" "12 624 63 64 64 2 4 1" "16 1200 100 128 64 1 4 1"; do
    for b in kb-main-coarse kb-coarse; do
      echo "$(date -u +%T) $b $KB: $(timeout 60 /tmp/$b $KB 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
tests chunks-default tests-chunks "" '*Backward*:*KernelChoice*:*Support*' 240
tests chunks-sm80 tests-chunks sm80 '*Backward*' 240
VSA_CUDA_LARGE_TESTS=1 tests chunks-large tests-chunks "" '*CudaBackwardLarge*' 200
echo "== $(date -u +%T) backward ($((SECONDS - start)) s)" >> "$S"
for r in 1 2; do
  for KB in "12 624 63 128 64 2 2 8" "16 768 192 128 64 0 2 4"; do
    for b in kb-main-coarse kb-chunks; do
      echo "$(date -u +%T) $b $KB: $(timeout 90 /tmp/$b $KB 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
