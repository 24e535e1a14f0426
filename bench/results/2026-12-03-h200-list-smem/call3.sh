#!/usr/bin/env bash
# Session 26, call 3: branch key-pass-issue-both (0fa05d7's code: the spread TMA requests and the
# list entry after next through shared memory, together), before landing. The C++ GPU backward
# tests and memcheck / racecheck of the partial-block and query-padding backward; the A/B against
# main (a14367d, .gpubin/main) with the host ahead (8 calls a timing), in turn, two rounds; vsa
# bench's five backward cases and the layer beside FastVideo; the Python GPU tests of the
# backward, the layer, torch.compile and CUDA graphs.
# Predicted before the call (call 2's measurement of the same code): Wan and H16 −2 to −3 %,
# query padding −0 to −0.5 %.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
timeout 120 $t --gtest_brief=1 --gtest_filter='*CudaBackward*:*DqMethod*:CudaSweep.Backward*' > "$OUT/tests.log" 2>&1
echo "backward tests rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -20 >> "$S"
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 10 $t \
    --gtest_filter='DimsAndBlocks/CudaBackwardPartialBlocks.*/0:*QueryPadding*' --gtest_brief=1 > "$OUT/$tool.log" 2>&1
  echo "$tool rc $? ($((SECONDS - start)) s)" >> "$S"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$tool.log" | head -5 >> "$S"
done
cat "$OUT/racecheck.log" >> "$OUT/memcheck.log"; rm -f "$OUT/racecheck.log"
wait; cat /tmp/main.rc >> "$S"; tail -n 1 /tmp/tk-build.log >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B, 8 calls a timing: main, new in turn, two rounds" >> "$S"
for r in 1 2; do
  for case in "12 624 63 128 64 2 2 8" "12 624 63 128 64 3 2 8" "16 768 64 128 64 0 2 8"; do
    for v in main new; do
      echo "$v $case: $(timeout 40 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) vsa bench attention, forward and backward, with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 220 vsa bench --case wan2.1-1.3b-480p --case synthetic-49k --case synthetic-b2-16k \
  --case synthetic-49k-top192 --case hunyuan-720p \
  --backends vsa,fastvideo-tk,fastvideo-triton --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -40 >> "$S"
echo "== $(date -u +%T) vsa bench layer with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 90 vsa bench --op layer --case wan2.1-1.3b-480p --backends vsa,vsa-fine,fastvideo-tk --iters 30 \
  --out "$OUT/layer" > "$OUT/layer.log" 2>&1
echo "layer rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)" "$OUT/layer.log" >> "$S"
rm -rf "$OUT/attention" "$OUT/layer" "$OUT/build.log"
echo "== $(date -u +%T) pytest: backward, layer, compile, torch on the GPU" >> "$S"
timeout 120 python3 -m pytest tests/python/test_cuda_backward.py tests/python/test_cuda_layer.py tests/python/test_layer.py \
  tests/python/test_compile.py tests/python/test_torch_gpu.py -q -p no:cacheprovider > "$OUT/pytest.log" 2>&1
tail -n 1 "$OUT/pytest.log" >> "$S"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
