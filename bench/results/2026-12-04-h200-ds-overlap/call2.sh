#!/usr/bin/env bash
# Session 35, call 2 (main's C++ GPU tests prebuilt at 7015ffa, nvcc 13.0 for sm_90a, carried
# in .gpubin/bin): compute-sanitizer racecheck over every C++ GPU test on the Hopper family, as
# eight GoogleTest shards side by side (session 34's single run was cut at 150 s, 364 tests).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT" build/gpu/tests/cuda
gunzip -c .gpubin/bin/tests-main.gz > build/gpu/tests/cuda/vsa_cuda_tests && chmod +x build/gpu/tests/cuda/vsa_cuda_tests
VSA_COMMIT=${COMMIT:-unknown} VSA_SANITIZE_TOOLS=racecheck VSA_SANITIZE_KERNELS=sm90 VSA_SANITIZE_SHARDS=8 \
  VSA_SANITIZE_TIMEOUT=500 bash scripts/gpu.sh sanitize
