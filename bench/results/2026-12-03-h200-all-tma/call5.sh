#!/usr/bin/env bash
# Session 23, call 5: delta beside the KV->Q lists (branch delta-beside-lists, 5b91781, on main
# 43419b1): the backward forks a per-thread side stream from the caller's, runs delta there while
# the lists' four small kernels run on the caller's stream, and joins it back before the key
# pass. main's C++ (22c67fc = 43419b1's, .gpubin/main) built beside it.
# The C++ GPU suite (with the new graph-capture and two-thread tests); vsa_kernel_bench main and
# new alternately, twice; the launches of a call (gap_probe.py); vsa bench's Wan case beside
# FastVideo; the GPU Python tests of the backward, torch (CUDA graphs) and compile.
# Predicted before the call: −40 to −55 µs a backward (delta's 60 µs beside the lists' ~56),
# ~−0.8 to −1 % on Wan.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
D=bench/results/2026-12-03-h200-all-tma
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
( cmake -S .gpubin/main -B /tmp/build-main -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 &&
  ninja -C /tmp/build-main vsa_kernel_bench >> /tmp/main-build.log 2>&1; echo "main build rc $?" > /tmp/main.rc ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
t=build/gpu/tests/cuda/vsa_cuda_tests
timeout 120 $t --gtest_brief=1 > "$OUT/tests.log" 2>&1; echo "suite rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests.log" | head -20 >> "$S"
wait; cat /tmp/main.rc >> "$S"; tail -n 1 /tmp/tk-build.log >> "$S"
declare -A kbv=([main]=/tmp/build-main/bench/kernel/vsa_kernel_bench [new]=build/gpu/bench/kernel/vsa_kernel_bench)
echo "== $(date -u +%T) A/B: main, new alternately, twice" >> "$S"
for r in 1 2; do
  for case in "12 624 63 128 64 2 2" "12 624 63 128 64 3 2"; do
    for v in main new; do
      echo "$v $case: $(timeout 30 ${kbv[$v]} $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) launches (new)" >> "$S"
timeout 60 python3 $D/gap_probe.py 2>&1 | grep -v -i warn >> "$S"
echo "== $(date -u +%T) vsa bench Wan with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 120 vsa bench --case wan2.1-1.3b-480p --backends vsa,fastvideo-tk,fastvideo-triton --iters 20 \
  --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" >> "$S"
rm -rf "$OUT/attention"
echo "== $(date -u +%T) GPU Python tests" >> "$S"
timeout 150 python3 -m pytest tests/python/test_cuda_backward.py tests/python/test_torch_gpu.py tests/python/test_compile.py \
  tests/python/test_attention_backward.py -q -p no:cacheprovider > "$OUT/pytest.log" 2>&1
tail -n 1 "$OUT/pytest.log" >> "$S"
rm -f "$OUT/build.log"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
