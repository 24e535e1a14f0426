#!/usr/bin/env bash
# device call 1 (untracked): the tensor-core coarse stage — tests, A/B against main's kernel, profile
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/summary.txt"; }
python3 -c "import scipy_openblas32" 2>/dev/null || python3 -m pip install -q --no-index --no-deps .whl/scipy_openblas32-*.whl >/dev/null 2>&1
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; nvcc --version | tail -1; } >> "$OUT/summary.txt"
log builds
( cmake -B build/gpu -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON -DVSA_PTXAS_VERBOSE=ON -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > "$OUT/build.log" 2>&1 && cmake --build build/gpu -j 8 --target vsa_cuda_tests >> "$OUT/build.log" 2>&1; log "new C++ build rc $?" ) &
( python3 -m pip install --no-build-isolation --no-deps --no-cache-dir -C cmake.define.VSA_CUDA_ARCHS=90a-real -C build-dir=build/py . > /tmp/py.log 2>&1; log "new package rc $?"; tail -3 /tmp/py.log >> "$OUT/summary.txt" ) &
( cd .gpubin/base && python3 -m pip install --no-build-isolation --no-deps --no-cache-dir -C cmake.define.VSA_CUDA_ARCHS=90a-real -C build-dir=build/py --target /tmp/base . > /tmp/py-base.log 2>&1; log "base package rc $?" ) &
wait
grep -A2 "coarse_stage_kernel" "$OUT/build.log" | grep -E "Used|spill" | sort | uniq -c >> "$OUT/summary.txt"
log "GPU C++ layer tests (new)"
timeout 120 build/gpu/tests/cuda/vsa_cuda_tests --gtest_filter='*Coarse*:*Layer*:*BlockMean*:*GateCombine*:*FusedCombine*' > "$OUT/tests.log" 2>&1
grep -E "FAILED|PASSED|tests ran|Failure|Expected|Which is|actual" "$OUT/tests.log" | head -40 | tee -a "$OUT/summary.txt"
log "layer stages, new and base alternating"
for round in 1 2; do
  for v in new base; do
    if [[ $v == new ]]; then echo "-- $round new"; timeout 60 python3 bench/layer/layer_stages.py --iters 20
    else echo "-- $round base"; PYTHONPATH=/tmp/base timeout 60 python3 bench/layer/layer_stages.py --iters 20; fi
  done
done > "$OUT/layer.log" 2>&1
{ echo "-- new hunyuan"; timeout 60 python3 bench/layer/layer_stages.py --latent 30 48 80 --heads 24 --topk 192 --iters 10
  echo "-- base hunyuan"; PYTHONPATH=/tmp/base timeout 60 python3 bench/layer/layer_stages.py --latent 30 48 80 --heads 24 --topk 192 --iters 10; } >> "$OUT/layer.log" 2>&1
grep -E "^--|coarse stage|layer forward" "$OUT/layer.log" | tee -a "$OUT/summary.txt"
log "python layer tests (new)"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/python/test_cuda_layer.py tests/python/test_layer.py -x > "$OUT/pytest.log" 2>&1; tail -3 "$OUT/pytest.log" | tee -a "$OUT/summary.txt"
log "sanitizers on the coarse tests"
for tool in memcheck racecheck synccheck; do echo "== $tool"; timeout 100 compute-sanitizer --tool $tool build/gpu/tests/cuda/vsa_cuda_tests --gtest_filter='*CudaCoarse*' 2>&1 | grep -E "PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race" | head -6; done > "$OUT/sanitize.log" 2>&1
cat "$OUT/sanitize.log" | tee -a "$OUT/summary.txt"
log "ncu: the coarse stage (Wan 480p)"
cat > /tmp/one_coarse.py <<'PY'
import torch, vsa
from vsa.layer import block_means, coarse_stage
meta = vsa.build_vsa_metadata((21, 30, 52), device="cuda")
vbs = meta.variable_block_sizes
q, k, v = (torch.randn(1, 12, meta.padded_length, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
m = block_means(q, k, v, vbs, vbs)
for _ in range(3): coarse_stage(*m, vbs, 63)
torch.cuda.synchronize()
PY
timeout 120 ncu --clock-control none -k "regex:coarse_stage" --launch-skip 2 --launch-count 1 --set full --import-source yes -o "$OUT/coarse" python3 /tmp/one_coarse.py > "$OUT/ncu.log" 2>&1
timeout 30 ncu --import "$OUT/coarse.ncu-rep" --page details >> "$OUT/ncu.log" 2>&1
timeout 30 ncu --import "$OUT/coarse.ncu-rep" --page source --csv --print-source sass 2>/dev/null | gzip > "$OUT/coarse-sass.csv.gz"
rm -f "$OUT/coarse.ncu-rep"
grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|Executed Instructions  " "$OUT/ncu.log" | head | tee -a "$OUT/summary.txt"
log done
