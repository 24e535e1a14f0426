#!/usr/bin/env bash
# Session 34, call 3: main's reliability checks, last run on 2026-12-01 (55856fd), before the
# stored-dS backward, forward v2's narrow tiles and the phased walks. The C++ GPU tests come
# prebuilt (ad98846's binary, carried in .gpubin/bin, put where scripts/gpu.sh looks for it);
# the Python package is built on the device. `scripts/gpu.sh python reliability` with 600 random
# cases per kernel (sm90: forward, phased forward and backward; sm90ws and sm90v1: forward;
# sm80: forward and backward; refused calls; torch.library.opcheck), then `scripts/gpu.sh
# pytest` (every Python test, GPU and CPU).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
mkdir -p build/gpu/tests/cuda
gunzip -c .gpubin/bin/tests-ramp.gz > build/gpu/tests/cuda/vsa_cuda_tests && chmod +x build/gpu/tests/cuda/vsa_cuda_tests
VSA_COMMIT=$COMMIT VSA_GPU_SWEEP_CASES=600 OUT=$OUT/reliability timeout 360 bash scripts/gpu.sh python reliability > /dev/null 2>&1
echo "== reliability rc $? ($((SECONDS - start)) s)" >> "$OUT/reliability/summary.txt"
rm -f "$OUT/reliability/build.log"
VSA_COMMIT=$COMMIT OUT=$OUT/pytest timeout $((575 - (SECONDS - start))) bash scripts/gpu.sh pytest > /dev/null 2>&1
echo "== pytest rc $? ($((SECONDS - start)) s)" >> "$OUT/pytest/summary.txt"
gzip -f "$OUT/reliability/reliability.log"
