#!/usr/bin/env bash
# Session 30, call 3: the branch as it lands (two query stages for the portable atomic pass
# without query padding, one with it; dq_finish reading no padding row's sums; delta as on main),
# checked whole: the build and every C++ GPU suite through ctest (the default kernels, the
# portable ones, the warp-specialized forward, the Hopper atomic dq path), the GPU Python tests;
# the portable backward against main (8dacafc, .gpubin/main) once more, and beside dense FA2's;
# then vsa bench beside FastVideo (five backward cases; the Hopper kernels are main's).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python ctest > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
echo "== $(date -u +%T) GPU Python tests" >> "$S"
timeout 150 python3 -m pytest -q tests/python/test_cuda_backward.py tests/python/test_cuda_layer.py \
  tests/python/test_layer.py tests/python/test_compile.py tests/python/test_torch_gpu.py > "$OUT/pytest.log" 2>&1
echo "pytest rc $? ($((SECONDS - start)) s)" >> "$S"; tail -n 2 "$OUT/pytest.log" >> "$S"
wait; cat /tmp/main.rc >> "$S"; tail -n 1 /tmp/tk-build.log >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) portable backward (VSA_CUDA_KERNEL=sm80), main and new in turn; dense FA2's" >> "$S"
for case in "12 624 63 128 64 2 2 8" "12 624 63 128 64 3 2 8" "16 768 64 128 64 0 2 8"; do
  for v in main new; do
    echo "$(date -u +%T) sm80 $v $case: $(VSA_CUDA_KERNEL=sm80 timeout 60 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
  done
done
timeout 60 python3 bench/results/2026-12-02-h200-portable-bwd/fa2_dense_bwd_time.py >> "$S" 2>&1
echo "== $(date -u +%T) vsa bench attention with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout $((575 - (SECONDS - start))) vsa bench --case wan2.1-1.3b-480p --case synthetic-49k \
  --case synthetic-b2-16k --case synthetic-49k-top192 --case hunyuan-720p --backends vsa,fastvideo-tk,fastvideo-triton \
  --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -40 >> "$S"
rm -rf "$OUT/attention" "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
