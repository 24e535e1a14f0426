#!/usr/bin/env bash
# Session 37, call 7 (prebuilt with nvcc 13.0 for sm_90a into .gpubin/bin: main's kernel bench and
# branch softmax-knockout's kernel bench built with VSA_KNOCKOUT=1 (the forward's softmax without
# its row sums) and =2 (a row's first score as its maximum: no row maxima); both give wrong
# results and are timing experiments only). main / no sums / no maxima in turn, two rounds.
# Predicted: docs/kernel-notes.md, "What the softmax's sums and maxima cost v2".
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commits: softmax-knockout f8ab020 (built with VSA_KNOCKOUT=1 and =2)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
for b in kb-main kb-knock1 kb-knock2; do gunzip -c .gpubin/bin/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
run() {  # label, binary; the kernel bench's arguments in KB
  echo "$(date -u +%T) $1 $KB: $(timeout 60 /tmp/$2 $KB 2>&1 | tail -n 1)" >> "$S"
}
for r in 1 2; do
  for KB in "16 768 192 128 64 0 1 4" "16 768 64 128 64 0 1 8" "12 624 63 128 64 2 1 8"; do
    run "main      " kb-main; run "no sums   " kb-knock1; run "no maxima " kb-knock2
  done
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
