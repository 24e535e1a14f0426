#!/usr/bin/env bash
# Session 30, call 4 (diagnostic, nothing to land): why the portable atomic key pass with two
# query stages gains nothing from query padding (call 2: its key pass 9,881 µs with padded
# queries against 9,857 without, where the one-stage pass goes 10,016 -> 9,741). Nsight Compute,
# every section and the stall samples per SASS line, of one key-pass launch on the Wan tiling:
# main as landed with query padding (one stage), call 1's tree (1c2d410, .gpubin/two: two
# stages always) with query padding and without.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
( cmake -S .gpubin/two -B /tmp/build-two -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
    -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/two-build.log 2>&1 &&
  ninja -C /tmp/build-two vsa_kernel_bench >> /tmp/two-build.log 2>&1; echo "two build rc $?" > /tmp/two.rc ) &
cmake -S . -B build/gpu -G Ninja -DVSA_CUDA_ARCHS=90a-real -DVSA_BUILD_TESTS=ON \
  -DVSA_GTEST_SOURCE_DIR=$PWD/.gtest > /tmp/main-build.log 2>&1 && ninja -C build/gpu vsa_kernel_bench >> /tmp/main-build.log 2>&1
S="$OUT/summary-main.txt"; echo "commit: $COMMIT; main build rc $? ($((SECONDS - start)) s)" > "$S"
wait; cat /tmp/two.rc >> "$S"
profile() {  # name binary partial
  VSA_CUDA_KERNEL=sm80 timeout 150 ncu --clock-control none -k "regex:bwd_kernel" --launch-skip 2 --launch-count 1 \
    --set full --import-source yes -o "$OUT/$1" "$2" 12 624 63 128 64 "$3" 2 1 > /dev/null 2>&1
  echo "$1: rc $? ($((SECONDS - start)) s)" >> "$S"
  ncu --import "$OUT/$1.ncu-rep" --page details > "$OUT/$1-details.log" 2>&1
  ncu --import "$OUT/$1.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip > "$OUT/$1-sass.csv.gz"
  rm -f "$OUT/$1.ncu-rep"
  grep -E "Duration|Compute \(SM\) Throughput|L1/TEX Hit Rate|L2 Hit Rate|Issue Slots Busy|Executed Instructions  |No Eligible|Stall" \
    "$OUT/$1-details.log" | head -20 >> "$S"
}
profile one-p3 build/gpu/bench/kernel/vsa_kernel_bench 3
profile two-p3 /tmp/build-two/bench/kernel/vsa_kernel_bench 3
profile two-p2 /tmp/build-two/bench/kernel/vsa_kernel_bench 2
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
