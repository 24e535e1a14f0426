#!/usr/bin/env bash
# Session 33, call 6 (call 2's `wp` binary, 03d92b1: its dQ pass phases its walks by default where
# a head's K exceeds half of L2): is the phased dQ pass slower on the HunyuanVideo-sized backward
# only because its launches are short? The stored-dS cap decides them: at 4,096 MB a launch is one
# head (5.5 waves of 396 CTAs), at 20,480 MB five heads (27 waves). Backward of H8 NK2160 top-216,
# phased (default) against VSA_CUDA_WALK_PHASE=off, at both caps, two rounds.
# Predicted (docs/kernel-notes.md): at 4,096 MB +3 to +5 % (call 2: +4.0 to +4.7 %); at 20,480 MB
# −1 to −3 %.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
gunzip -c .gpubin/bin/kb-wp.gz > /tmp/kb && chmod +x /tmp/kb
for r in 1 2; do
  for cap in 4096 20480; do
    for W in off on; do
      if [ $W = on ]; then phase=""; else phase=off; fi
      echo "$(date -u +%T) cap $cap phase ${phase:-default}: $(VSA_CUDA_DS_WORKSPACE_MB=$cap VSA_CUDA_WALK_PHASE=$phase timeout 60 /tmp/kb 8 2160 216 128 64 0 2 2 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
