#!/usr/bin/env bash
# Session 40, call 1 (prebuilt with nvcc 13.0 for sm_90a into .gpubin/s40; the Python package
# built on the device from main, main-commit.txt):
# 1. branch cuda-opt-in-per-device (optin-commit.txt, rebased on main): the two-thread coarse-stage
#    test, three rounds, then the whole C++ GPU suite (every launch through the new allowance helper).
# 2. branch cuda-list-chunks (chunks-commit.txt: the branch plus a diagnostic test not for main):
#    the 2^31-entry case with its exact closed form (VSA_CUDA_LARGE_TESTS=1), then the diagnostic:
#    session 39's values (0.746) on one head without chunks. Predicted: docs/kernel-notes.md.
# 3. main: `vsa bench` beside both FastVideo kernels on the five cases, forward and backward,
#    rounds while time is left (issues 10 and 11's ratios with the lazy max).
# Run from the checkout root with carry [".gpubin/s40", ".whl", ".gtest", ".peers"].
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ
  echo "commits: main $(cat .gpubin/s40/main-commit.txt), cuda-opt-in-per-device $(cat .gpubin/s40/optin-commit.txt), cuda-list-chunks+diag $(cat .gpubin/s40/chunks-commit.txt)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
tk=$!
( VSA_COMMIT=$(cat .gpubin/s40/main-commit.txt) OUT=/tmp/gpu-out bash scripts/gpu.sh python > /tmp/vsa-build.log 2>&1; echo "vsa build rc $?" >> /tmp/vsa-build.log ) &
build=$!
for b in tests-optin tests-chunks; do gunzip -c .gpubin/s40/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
tests() {  # label, binary, filter, timeout, log
  timeout $4 /tmp/$2 --gtest_filter="$3" >> "$OUT/$5" 2>&1
  echo "$1: rc $? ($((SECONDS - start)) s)" >> "$S"
  grep -E "^\[  PASSED|^\[  FAILED|^\[  SKIPPED|tests ran|Failure|FAILED  \]|^diag" "$OUT/$5" | tail -n 8 >> "$S"
}
for round in 1 2 3; do tests optin-two-threads-$round tests-optin "CudaCoarseStageThreads.*" 60 tests-optin-threads.log; done
VSA_CUDA_LARGE_TESTS=1 tests chunks-large tests-chunks "CudaBackwardLarge*" 200 tests-chunks.log
tests optin-suite tests-optin "*" 240 tests-optin-suite.log
wait $build; tail -n 1 /tmp/vsa-build.log >> "$S"; grep -E "FAILED" /tmp/gpu-out/summary.txt >> "$S"
wait $tk; tail -n 1 /tmp/tk-build.log >> "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
for r in 1 2 3; do
  ((SECONDS - start > 500)) && { echo "round $r not started ($((SECONDS - start)) s)" >> "$S"; break; }
  echo "== $(date -u +%T) round $r: vsa bench with FastVideo ($((SECONDS - start)) s)" >> "$S"
  PYTHONPATH=$PEERS timeout $((585 - (SECONDS - start))) vsa bench --case wan2.1-1.3b-480p --case synthetic-49k \
    --case synthetic-b2-16k --case synthetic-49k-top192 --case hunyuan-720p --backends vsa,fastvideo-tk,fastvideo-triton \
    --iters 20 > "$OUT/attention-round$r.log" 2>&1
  echo "attention rc $?" >> "$S"; grep -E "best FastVideo|^[a-z].*(blk|latent|synthetic)" "$OUT/attention-round$r.log" >> "$S"
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
