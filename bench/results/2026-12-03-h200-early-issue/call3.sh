#!/usr/bin/env bash
# Session 21, call 3: the tree to land (branch ds-real-keys after call 2: the key passes' lookups
# a pair ahead and the Hopper passes' under their products; no skipped dSᵀ rows; the Hopper key
# pass's real-query counts a pair ahead) against main (5889704, from .gpubin/main), and the tree
# beside FastVideo: ctest; memcheck of the backward with partial blocks and query padding;
# vsa_kernel_bench main and new alternately, twice; vsa bench attention (forward and backward)
# and layer beside FastVideo's ThunderKittens and Triton kernels; the GPU Python tests of the
# backward and the layer.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
grep -A2 'sm9010bwd_kernel\|bwd_dq_stored_kernel\|sm8010bwd_kernel' "$OUT/build.log" | grep -E 'Compiling|spill|Used' | sed 's/ptxas info    : //' > "$OUT/ptxas-bwd.txt"
grep -c 'serialized' "$OUT/build.log" >> "$S"
echo "== $(date -u +%T) ctest" >> "$S"
timeout 170 ctest --test-dir build/gpu --timeout 160 -j 4 > "$OUT/ctest.log" 2>&1; echo "rc $?" >> "$S"
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout" "$OUT/ctest.log" >> "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10 $t \
  --gtest_filter='DimsAndBlocks/CudaBackwardPartialBlocks.*/0:DimsAndBlocks/CudaBackwardPartialBlocks.*/1' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?" >> "$S"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" "$OUT/memcheck.log" | head -5 >> "$S"
wait; cat /tmp/main.rc >> "$S"; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) A/B: main, new alternately, twice (2: backward, 3: deterministic)" >> "$S"
declare -A kb=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
for r in 1 2; do
  for case in "sm90 12 624 63 128 64 2 2" "sm90 12 624 63 128 64 3 2" "sm90 16 768 64 128 64 0 2" \
              "sm90 12 624 63 64 64 3 2" "sm80 12 624 63 128 64 2 2" "sm80 12 624 63 128 64 3 3"; do
    for v in main new; do
      set -- $case
      echo "$v $case: $(VSA_CUDA_KERNEL=$1 timeout 60 ${kb[$v]} ${case#* } 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) vsa bench attention, forward and backward, with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 170 vsa bench --case wan2.1-1.3b-480p --case synthetic-49k --case synthetic-b2-16k \
  --backends vsa,fastvideo-tk,fastvideo-triton --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -30 >> "$S"
echo "== $(date -u +%T) vsa bench layer with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 90 vsa bench --op layer --case wan2.1-1.3b-480p --backends vsa,vsa-fine,fastvideo-tk --iters 30 \
  --out "$OUT/layer" > "$OUT/layer.log" 2>&1
echo "layer rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)" "$OUT/layer.log" >> "$S"
echo "== $(date -u +%T) GPU Python tests: backward, layer" >> "$S"
timeout 100 python3 -m pytest tests/python/test_cuda_backward.py tests/python/test_cuda_layer.py -q -p no:cacheprovider \
  > "$OUT/pytest.log" 2>&1; tail -n 1 "$OUT/pytest.log" >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
