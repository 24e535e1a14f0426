#!/usr/bin/env bash
# The project's one GPU job (run on the lent H200 through the device tool):
# builds the library and the Python package for sm_90a, runs the GPU tests
# (C++ and Python) and the benchmark, and writes every log under $OUT.
#
#   scripts/gpu.sh [stage ...]     stages: cpp python ctest pytest kernels bench
#                                  (default: these; `build` means cpp python);
#                                  also `profile`: Nsight Compute on one backward
#                                  of each dq path (Wan 480p shape), with the key
#                                  pass's stall samples per SASS line, and
#                                  `profile-forward`: on vsa's and ThunderKittens'
#                                  forward kernels (Wan 480p, H16 S49152), with v2's
#                                  stall samples per SASS line on Wan 480p, and
#                                  `profile-layer`: on the layer's own kernels
#                                  (block means, coarse stage, gate combine; Wan 480p),
#                                  with the coarse stage's SASS and stall samples
#
# What git ignores and the job needs travels only when the call carries it:
#   run(carry=[".whl", ".gtest", ".peers"], command="VSA_COMMIT=<hash> bash scripts/gpu.sh ...")
# .whl: the scipy-openblas32 wheel (both builds link its OpenBLAS; the image has no
# such package); .gtest: GoogleTest's sources (cp -r /usr/src/googletest .gtest);
# .peers: FastVideo's kernels for the bench (../shared/peers/README.md). The compat
# stage also needs .peers/fv_tests, the diffusers stage .wheels (both below).
#
# Environment: OUT (log folder, default ./gpu-out), VSA_COMMIT (the commit
# being measured; the device copy has no .git), VSA_BENCH_ARGS (extra flags
# for `vsa bench`), VSA_PYTEST_ARGS (what pytest runs; default tests/python),
# GTEST_DIR (GoogleTest sources when the machine has no installed GoogleTest;
# default .gtest, a copy of /usr/src/googletest), VSA_GPU_BUDGET (seconds the
# stages may take, default 570: below).
#
# One device call runs at most 600 s, and the default stages take longer (on the
# H200, 2026-12-04: the two builds 83 s, ctest 125 s, pytest 160 s; the kernels
# stage about a minute; the default bench, five cases, eight backends, forward and
# backward, 110 runs each, several minutes more). So every stage runs within
# VSA_GPU_BUDGET seconds from the job's start: its long steps under `timeout` for
# what is left, and a stage that would start with less than a minute left is
# skipped; the summary ends naming the stages that did not run. The whole job in
# two calls:  scripts/gpu.sh build ctest pytest kernels,  then  scripts/gpu.sh
# python bench  (a call within the machine's 30 s warm time keeps build/ and the
# installed package: plain `bench` does there). Set VSA_GPU_BUDGET lower when
# the call runs other steps too.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
stages=${*:-cpp python ctest pytest kernels bench}
stages=${stages//build/cpp python}
jobs=$(nproc)
status=0
budget=${VSA_GPU_BUDGET:-570}
skipped=
# A step cut by its timeout (or by the call's end) keeps what Python printed before.
export PYTHONUNBUFFERED=1

note() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$OUT/summary.txt"; }
named() { [[ " $stages " == *" $1 "* ]]; }
# Whether to run a named stage: not when less than a minute of the budget is left.
want() {
  named "$1" || return 1
  ((budget - SECONDS >= 60)) && return 0
  note "$1: not started, $((budget - SECONDS)) s of VSA_GPU_BUDGET=$budget left"
  skipped+=" $1"
  status=1
  return 1
}
# Seconds of the budget left, at least 1 (`timeout 0` would never fire).
left() { echo $((budget - SECONDS > 1 ? budget - SECONDS : 1)); }
# failed STEP RC: the step's failure, or its cut at the budget (timeout's 124).
failed() {
  if (($2 == 124)); then note "$1 cut: VSA_GPU_BUDGET=$budget s reached"; else note "$1 FAILED"; fi
  status=1
}

# At most 8 files come back from the device, and the default stages write 8:
# summary.txt (environment, stage results and the kernels stage's timings),
# build.log, ctest.log, pytest.log, bench.log and bench/results.{json,csv,png}
# (compat.log, reliability.log, sanitize.log etc. when named).
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: ${VSA_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null ||
    echo "unknown: VSA_COMMIT=<hash> names it (the device copy has no .git)")}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  nvcc --version | tail -n 1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"

# `vsa bench` times vsa beside FastVideo's kernels, assembled into the carried .peers
# (../shared/peers/README.md), which go on the bench's PYTHONPATH only: the compat stage needs
# no real fastvideo_kernel importable. Their first import builds ThunderKittens (~80 s on the
# device's cores), started here in the background so the bench does not wait for it.
peers=$PWD/.peers/fv_py
tk_build=
if named bench && [[ -d $peers ]]; then
  PYTHONPATH=$peers${PYTHONPATH:+:$PYTHONPATH} python3 -c "import fastvideo_kernel._C" > /tmp/vsa-tk-build.log 2>&1 &
  tk_build=$!
fi

# OpenBLAS for the CPU backend (docs/cpu-backend.md). The lent machine reaches no
# registry, so the scipy-openblas32 wheel comes carried in .whl/
# (pip download --no-deps -d .whl scipy-openblas32==0.3.34.481.3).
if ! python3 -c "import scipy_openblas32" 2>/dev/null && compgen -G ".whl/scipy_openblas32-*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps .whl/scipy_openblas32-*.whl 2>&1 | tee -a "$OUT/summary.txt"
fi
if { named cpp || named python; } && ! python3 -c "import scipy_openblas32" 2>/dev/null; then
  note "no scipy-openblas32 (carry .whl with its wheel): the Python build, and a C++ build" \
    "without a system OpenBLAS, stop at OpenBLAS"
fi

if want cpp; then
  note "build: C++ library and tests for sm_90a"
  gtest_args=()
  [[ -d ${GTEST_DIR:-.gtest} ]] && gtest_args=(-DVSA_GTEST_SOURCE_DIR="$(cd "${GTEST_DIR:-.gtest}" && pwd)")
  { cmake -B build/gpu -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
      -DVSA_PTXAS_VERBOSE=ON "${gtest_args[@]}" &&
    timeout "$(left)" cmake --build build/gpu -j "$jobs"; } > "$OUT/build.log" 2>&1 || failed "C++ build" $?
  grep -E "registers|spill" "$OUT/build.log" | sort | uniq -c | tee -a "$OUT/summary.txt"
  # ptxas serializes a kernel's wgmma products when it cannot keep their accumulators in
  # place (C7511, C7512): the kernel still passes every test, only slower (docs/kernel-notes.md,
  # "Partial blocks multiplied over their real rows only"), so the job fails on it.
  serialized=$(grep -oE "wgmma.mma_async instructions are serialized.*function '[^']+'" "$OUT/build.log" |
    sed -E "s/.*function '([^']+)'/\1/" | sort -u)
  if [[ -n $serialized ]]; then
    note "ptxas serialized wgmma products in: $(echo $serialized)"
    status=1
  fi
fi

if want python; then
  note "build: Python package"
  timeout "$(left)" python3 -m pip install --no-build-isolation --no-deps --no-cache-dir \
    -C cmake.define.VSA_CUDA_ARCHS=90a-real -C build-dir=build/py . >> "$OUT/build.log" 2>&1 ||
    failed "pip install" $?
  vsa info 2>&1 | tee -a "$OUT/summary.txt"  # which kernels each GPU runs
fi

if want ctest; then
  note "ctest"
  timeout "$(left)" ctest --test-dir build/gpu --output-on-failure --timeout 300 -j 4 > "$OUT/ctest.log" 2>&1 ||
    failed ctest $?
  grep -E "tests passed|tests failed" "$OUT/ctest.log" | tee -a "$OUT/summary.txt"
fi

if want pytest; then
  note "pytest (GPU and CPU tests)"
  # shellcheck disable=SC2086
  timeout "$(left)" python3 -m pytest ${VSA_PYTEST_ARGS:-tests/python} -q -p no:cacheprovider \
    > "$OUT/pytest.log" 2>&1 || failed pytest $?
  tail -n 1 "$OUT/pytest.log" | tee -a "$OUT/summary.txt"
fi

if want kernels; then
  note "kernels: forward and backward of both kernel families, no Python (bench/kernel)"
  kb=build/gpu/bench/kernel/vsa_kernel_bench
  for family in default sm90ws sm90v1 sm80; do
    for shape in "12 624 63 128 64 2" "12 624 63 128 64 1" "16 768 64 128 64 0" "16 384 32 128 128 0" "12 624 63 64 64 1"; do
      kernel_env=()
      [[ $family == default ]] || kernel_env=(VSA_CUDA_KERNEL="$family")
      # shellcheck disable=SC2086
      echo "$family: $(env "${kernel_env[@]}" timeout "$(left)" $kb $shape 2>&1)"
    done
  done | tee -a "$OUT/summary.txt"  # its own file would be the ninth back
fi

if want profile; then
  note "profile: ncu on the backward's kernels, Wan 480p shape, both dq paths"
  # At head dim 128 the Hopper backward stores dS (its dQ pass is bwd_dq_stored_kernel)
  # whether or not it is asked to be deterministic; VSA_CUDA_DQ picks the path
  # (src/cuda/kernel_choice.hpp).
  kernels="count_kernel|scan_kernel|place_kernel|order_kernel|delta_kernel|bwd_kernel|dq_finish_kernel|bwd_dq_stored_kernel"
  for dq in atomic stored; do
    VSA_CUDA_DQ=$dq ncu --clock-control none --launch-count 8 -k "regex:$kernels" --section SpeedOfLight \
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats \
      build/gpu/bench/kernel/vsa_kernel_bench 12 624 63 128 64 1 2
  done > "$OUT/profile.log" 2>&1 || { note "profile FAILED"; status=1; }
  # Where the key pass's warps wait (the default, stored-dS path, docs/kernel-notes.md):
  # every section and the stall samples per SASS instruction of one launch.
  ncu --clock-control none -k "regex:bwd_kernel" --launch-skip 2 --launch-count 1 --set full \
    --import-source yes -o "$OUT/bwd" build/gpu/bench/kernel/vsa_kernel_bench 12 624 63 128 64 2 2 \
    >> "$OUT/profile.log" 2>&1 || { note "profile (stall samples) FAILED"; status=1; }
  ncu --import "$OUT/bwd.ncu-rep" --page details >> "$OUT/profile.log" 2>&1
  ncu --import "$OUT/bwd.ncu-rep" --page source --csv --print-source sass > "$OUT/bwd-sass.csv" 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput" \
    "$OUT/profile.log" | tee -a "$OUT/summary.txt"
fi

if want profile-forward; then
  # Where the Hopper forward's time goes next to ThunderKittens' on the two anchor
  # cases (vsa even with TK on H16 S49152, behind on Wan 480p: docs/kernel-notes.md).
  # TK comes from ../shared/peers (carry .peers; its first import builds it, ~80 s).
  note "profile-forward: ncu on vsa's and ThunderKittens' forward kernels, Wan 480p and H16 S49152"
  for case in wan2.1-1.3b-480p synthetic-49k; do
    for kernel in "vsa:fwd_tma_kernel" "fastvideo-tk:fwd_attend_ker"; do
      echo "==== $case ${kernel%%:*}"
      PYTHONPATH=$PWD/.peers/fv_py${PYTHONPATH:+:$PYTHONPATH} ncu --clock-control none -k "regex:${kernel#*:}" \
        --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
        --section MemoryWorkloadAnalysis vsa bench --case "$case" --backends "${kernel%%:*}" --no-backward \
        --iters 3 --warmup 1
    done
  done > "$OUT/profile-forward.log" 2>&1 || { note "profile-forward FAILED"; status=1; }
  # Where v2's warps wait on Wan 480p: the stall samples per SASS instruction of one
  # launch (fwd-sass.csv.gz; the report itself is not kept).
  ncu --clock-control none -k "regex:fwd_tma_kernel" --launch-skip 3 --launch-count 1 --set full \
    --import-source yes -o "$OUT/fwd" vsa bench --case wan2.1-1.3b-480p --backends vsa --no-backward \
    --iters 3 --warmup 1 >> "$OUT/profile-forward.log" 2>&1 || { note "profile-forward (stall samples) FAILED"; status=1; }
  ncu --import "$OUT/fwd.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip > "$OUT/fwd-sass.csv.gz"
  rm -f "$OUT/fwd.ncu-rep"
  grep -E "^==== |Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible" \
    "$OUT/profile-forward.log" | tee -a "$OUT/summary.txt"
fi

if want profile-layer; then
  # Where the layer's time outside the fine kernel goes (docs/kernel-notes.md,
  # "VSA layer"): one Wan 480p layer forward, its four kernels of its own (no
  # gradient: the gate combine runs in the fine kernel's epilogue, docs/layer.md).
  note "profile-layer: ncu on block_mean, coarse_stage and gate_combine, Wan 480p"
  layer_once='import torch, vsa
meta = vsa.build_vsa_metadata((21, 30, 52), device="cuda")
shape = (1, 12, meta.padded_length, 128)
q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
gate = torch.rand(shape, device="cuda", dtype=torch.bfloat16)
vbs = meta.variable_block_sizes
for _ in range(2):
    vsa.video_sparse_attn(q, k, v, vbs, vbs, 63, gate=gate)
torch.cuda.synchronize()'
  ncu --clock-control none -k "regex:block_mean_kernel|coarse_stage_kernel|gate_combine_kernel" \
    --launch-skip 4 --launch-count 4 --set full --import-source yes -o "$OUT/layer" \
    python3 -c "$layer_once" > "$OUT/profile-layer.log" 2>&1 || { note "profile-layer FAILED"; status=1; }
  ncu --import "$OUT/layer.ncu-rep" --print-summary per-kernel >> "$OUT/profile-layer.log" 2>&1
  ncu --import "$OUT/layer.ncu-rep" --page details >> "$OUT/profile-layer.log" 2>&1
  ncu --import "$OUT/layer.ncu-rep" -k regex:coarse_stage_kernel --page source --csv --print-source sass \
    > "$OUT/coarse-sass.csv" 2>&1
  grep -E "^  [a-z_]+kernel|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Issue Slots Busy" \
    "$OUT/profile-layer.log" | tee -a "$OUT/summary.txt"
fi

if want bench; then
  note "bench"
  bench_env=()
  if [[ -n $tk_build ]]; then
    wait "$tk_build" || { note "ThunderKittens build FAILED (its bench rows say why):"; tail -n 5 /tmp/vsa-tk-build.log | tee -a "$OUT/summary.txt"; }
    bench_env=(PYTHONPATH="$peers${PYTHONPATH:+:$PYTHONPATH}")
  else
    note "no .peers/fv_py: FastVideo's kernels read n/a in the bench (carry .peers: ../shared/peers/README.md)"
  fi
  # shellcheck disable=SC2086
  env "${bench_env[@]}" timeout "$(left)" vsa bench --out "$OUT/bench" ${VSA_BENCH_ARGS:-} > "$OUT/bench.log" 2>&1 ||
    failed bench $?
  tail -n 40 "$OUT/bench.log"
fi

# Four stages run only when named (each writes one more log; all need a
# `build` first, in this call or an earlier one on the same machine):
#   compat       FastVideo's own VSA kernel tests (test_vsa*.py, which includes
#                test_vsa_utils.py), unchanged, on vsa.compat.fastvideo_kernel
#                through the pytest plugin, from VSA_FASTVIDEO_TESTS (default
#                .peers/fv_tests: FastVideo's fastvideo-kernel/tests/ with its
#                __init__.py and utils.py, not committed; carry it). tqdm, which
#                test_vsa.py imports, comes from a wheel under .whl/ when the
#                machine lacks it.  -> compat.log
#   reliability  the random CUDA sweep against the CPU backend on every forward
#                kernel (Hopper v2 and v1, portable), VSA_GPU_SWEEP_CASES (default 1000) cases each, forward
#                repeated bitwise, backward (both dq paths); refused calls write
#                nothing; torch.library.opcheck on CUDA  -> reliability.log
#   sanitize     the C++ GPU tests under compute-sanitizer memcheck, racecheck,
#                synccheck and initcheck, on both kernel families (and
#                the Hopper forward's v1 with VSA_SANITIZE_KERNELS=sm90v1), each run cut at
#                VSA_SANITIZE_TIMEOUT (240) seconds; VSA_SANITIZE_TOOLS and
#                VSA_SANITIZE_KERNELS pick a subset, VSA_SANITIZE_SHARDS=N
#                splits each run into N GoogleTest shards run side by side
#                -> sanitize.log
#   diffusers    installs the pinned diffusers from .wheels/ (carried: filled
#                by scripts/wheelhouse.sh, since the machine has no network), runs
#                the diffusers and grid-attention tests (CPU and CUDA) and one
#                Wan2.1-1.3B denoising step, default SDPA against vsa
#                (bench/diffusers/wan_step.py, VSA_WAN_STEP_ARGS adds flags);
#                needs only the `python` stage  -> diffusers.log
# e.g. scripts/gpu.sh build reliability (3 files back; about 8 of a call's 10 minutes: 600
#      cases a kernel took 254 s on 2026-12-04), then the sanitizers in calls of their own,
#      split by VSA_SANITIZE_TOOLS (memcheck on both families took 110 s, racecheck on the
#      Hopper one 105 s in 8 shards): VSA_SANITIZE_TOOLS=memcheck scripts/gpu.sh cpp sanitize;
#      scripts/gpu.sh python diffusers (3 files back).
if want compat; then
  fv_tests=${VSA_FASTVIDEO_TESTS:-.peers/fv_tests}
  note "compat: FastVideo's VSA tests from $fv_tests on vsa.compat"
  if ! python3 -c 'import tqdm' 2>/dev/null && compgen -G '.whl/tqdm-*.whl' >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/compat-site .whl/tqdm-*.whl &&
      export PYTHONPATH=/tmp/compat-site${PYTHONPATH:+:$PYTHONPATH}
  fi
  # The CuTe-targeted VSA-256 tests skip without flash_attn.cute; the stand-in
  # lets them check vsa's answers (vsa/compat/pytest_plugin.py says how).
  timeout "$(left)" python3 -m pytest -p vsa.compat.pytest_plugin --vsa-stand-in-flash-attn-cute \
    -p no:cacheprovider -v -s -rs "$fv_tests"/test_vsa*.py > "$OUT/compat.log" 2>&1 || failed compat $?
  grep -E "^vsa.compat:" "$OUT/compat.log" | tee -a "$OUT/summary.txt"
  tail -n 1 "$OUT/compat.log" | tee -a "$OUT/summary.txt"
fi

cuda_tests=build/gpu/tests/cuda/vsa_cuda_tests
# The suites whose kernels VSA_CUDA_KERNEL=sm80 switches to the portable family
# (parameterized suites carry a prefix: Cases/CudaForward.*), and those that
# sm90v1 and sm90ws switch to another version of the Hopper forward.
portable_suites='*CudaForward*:*CudaPartialBlocks*:*CudaBackward*:CudaSweep*:CudaFailedCall*'
hopper_forward_suites='*CudaForward*:*CudaPartialBlocks*:CudaSweep.*Forward*:CudaFailedCall*'

if want reliability; then
  note "reliability: CUDA sweep, ${VSA_GPU_SWEEP_CASES:-1000} cases per kernel"
  for kernel in sm90 sm90ws sm90v1 sm80; do
    sweep='CudaSweep*:CudaFailedCall*'
    [[ $kernel == sm90v1 || $kernel == sm90ws ]] && sweep='CudaSweep.Forward*'  # forward kernels only
    VSA_CUDA_KERNEL=$kernel VSA_GPU_SWEEP_CASES=${VSA_GPU_SWEEP_CASES:-1000} \
      timeout "$(left)" "$cuda_tests" --gtest_filter="$sweep" >> "$OUT/reliability.log" 2>&1 ||
      failed "reliability sweep ($kernel)" $?
  done
  timeout "$(left)" python3 -m pytest tests/python/test_opcheck.py -q -p no:cacheprovider \
    >> "$OUT/reliability.log" 2>&1 || failed opcheck $?
  grep -E "^CudaSweep|SKIPPED|PASSED|FAILED|passed|failed" "$OUT/reliability.log" | tee -a "$OUT/summary.txt"
fi

if want sanitize; then
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # shellcheck disable=SC2086
  for tool in ${VSA_SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
    for kernel in ${VSA_SANITIZE_KERNELS:-sm90 sm80}; do
      filter='*'
      [[ $kernel == sm80 ]] && filter=$portable_suites
      [[ $kernel == sm90v1 || $kernel == sm90ws ]] && filter=$hopper_forward_suites
      extra=()
      [[ $tool == memcheck ]] && extra=(--leak-check full)
      note "sanitize: $tool, VSA_CUDA_KERNEL=$kernel"
      echo "==== $tool, VSA_CUDA_KERNEL=$kernel, --gtest_filter=$filter" >> "$OUT/sanitize.log"
      first_line=$(($(wc -l < "$OUT/sanitize.log") + 1))
      # VSA_SANITIZE_SHARDS=N runs the suite as N GoogleTest shards side by side
      # (racecheck on the portable family outlasts one call otherwise); each
      # shard's log is appended in order, and any shard's failure fails the run. The shards'
      # logs wait outside $OUT: a call cut mid-run would return them instead of the summary.
      shards=${VSA_SANITIZE_SHARDS:-1} pids=() cut=$(left) shard_log=/tmp/vsa-sanitize-shard
      ((cut < ${VSA_SANITIZE_TIMEOUT:-240})) || cut=${VSA_SANITIZE_TIMEOUT:-240}
      for ((shard = 0; shard < shards; ++shard)); do
        GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$shard \
          VSA_CUDA_KERNEL=$kernel VSA_GPU_SWEEP_CASES=${VSA_SANITIZE_SWEEP_CASES:-16} \
          timeout "$cut" "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 99 \
          --print-limit 20 "$cuda_tests" --gtest_filter="$filter" --gtest_brief=1 > "$shard_log$shard" 2>&1 &
        pids+=($!)
      done
      rc=0
      for ((shard = 0; shard < shards; ++shard)); do
        wait "${pids[shard]}" || rc=$?
        ((shards == 1)) || echo "---- shard $shard of $shards" >> "$OUT/sanitize.log"
        cat "$shard_log$shard" >> "$OUT/sanitize.log" && rm -f "$shard_log$shard"
      done
      { tail -n "+$first_line" "$OUT/sanitize.log" | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Device not supported|PASSED|FAILED" | tail -n $((4 * shards))
        echo "   exit $rc"; } | tee -a "$OUT/summary.txt"
      ((rc == 0)) || status=1
    done
  done
fi

if want diffusers; then
  note "diffusers: pinned diffusers from .wheels, its tests, one Wan2.1-1.3B step"
  if [[ -f .wheels/REQUIREMENT ]]; then
    python3 -m pip install --no-index --find-links .wheels "$(cat .wheels/REQUIREMENT)" > "$OUT/diffusers.log" 2>&1 ||
      { note "diffusers install FAILED"; status=1; }
  else
    note "no .wheels/REQUIREMENT: run scripts/wheelhouse.sh where PyPI is reachable and carry .wheels"
    status=1
  fi
  timeout "$(left)" python3 -m pytest tests/python/test_diffusers_wan.py tests/python/test_grid_attention.py -q -rP \
    -p no:cacheprovider >> "$OUT/diffusers.log" 2>&1 || failed "diffusers tests" $?
  grep -E "^(dense mode vs|bf16 vs|error vs)|passed|failed" "$OUT/diffusers.log" | tee -a "$OUT/summary.txt"
  # shellcheck disable=SC2086
  timeout "$(left)" python3 bench/diffusers/wan_step.py ${VSA_WAN_STEP_ARGS:-} >> "$OUT/diffusers.log" 2>&1 ||
    failed wan_step $?
  grep -E " ms   speed-up|^check:" "$OUT/diffusers.log" | tee -a "$OUT/summary.txt"
fi

[[ -z $skipped ]] ||
  note "not run, out of time:$skipped (next call: scripts/gpu.sh$skipped, after \`build\` on a fresh machine)"
note "done, status $status"
exit $status
