#!/usr/bin/env bash
# Session 25, call 3: main (a54711a: key-pass-chain merged), the landed code measured once more
# beside FastVideo (vsa bench's three backward cases, the layer twice), and its key pass profiled
# on the Wan tiling (Nsight Compute, the full set and the SASS-level stall samples) for the next
# changes. No prediction: a measurement of what landed (call 1 measured the same kernels).
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PEERS=$PWD/.peers/fv_py
( PYTHONPATH=$PEERS python3 -c "import fastvideo_kernel._C" > /tmp/tk-build.log 2>&1; echo "tk build rc $?" >> /tmp/tk-build.log ) &
VSA_COMMIT=$COMMIT bash scripts/gpu.sh cpp python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
wait; tail -n 1 /tmp/tk-build.log >> "$S"
echo "== $(date -u +%T) vsa bench attention, forward and backward, with FastVideo" >> "$S"
PYTHONPATH=$PEERS timeout 200 vsa bench --case wan2.1-1.3b-480p --case synthetic-49k --case synthetic-b2-16k \
  --backends vsa,fastvideo-tk,fastvideo-triton --iters 20 --out "$OUT/attention" > "$OUT/attention.log" 2>&1
echo "attention rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)|^[a-z].*(blk|latent|synthetic)" "$OUT/attention.log" | head -30 >> "$S"
for r in 1 2; do
  echo "== $(date -u +%T) vsa bench layer with FastVideo, run $r" >> "$S"
  PYTHONPATH=$PEERS timeout 90 vsa bench --op layer --case wan2.1-1.3b-480p --backends vsa,vsa-fine,fastvideo-tk --iters 30 \
    --out "$OUT/layer" > "$OUT/layer-$r.log" 2>&1
  echo "layer rc $?" >> "$S"; grep -E "^  (vsa|fastvideo)" "$OUT/layer-$r.log" >> "$S"
done
rm -rf "$OUT/attention" "$OUT/layer"
echo "== $(date -u +%T) the key pass in full (Wan tiling)" >> "$S"
kb=build/gpu/bench/kernel/vsa_kernel_bench
timeout 200 ncu --clock-control none -k "regex:^bwd_kernel" --launch-skip 2 --launch-count 1 --set full \
  --import-source yes -o "$OUT/bwd" $kb 12 624 63 128 64 2 2 > "$OUT/profile.log" 2>&1
ncu --import "$OUT/bwd.ncu-rep" --page details >> "$OUT/profile.log" 2>&1
ncu --import "$OUT/bwd.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip > "$OUT/bwd-sass.csv.gz"
rm -f "$OUT/bwd.ncu-rep" "$OUT/build.log"
grep -E "Duration|Throughput|Pipe|Issue|Stall|Warp Cycles|Eligible|Active Warps|Shared|Elapsed Cycles|SM Frequency" "$OUT/profile.log" | head -60 >> "$S"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
