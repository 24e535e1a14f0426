#!/usr/bin/env bash
# Session 23, call 3: where the host waits in a CUDA backward call (host_probe.py), on main
# (22c67fc): call 2's timeline showed the device idle ~140 µs between the call's first kernel
# (autograd's zeros for lse's gradient) and the backward's first launch, although the calls were
# issued back to back; and vsa bench's backward (5.474 ms) sat ~0.4 ms over the timeline's span.
# Expected before the call: if a call waits for the device, its host time equals its device time.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
D=bench/results/2026-12-03-h200-all-tma
VSA_COMMIT=$COMMIT bash scripts/gpu.sh python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
echo "== $(date -u +%T) host probe" >> "$S"
timeout 120 python3 $D/host_probe.py 2>&1 | grep -v Warn >> "$S"
echo "== $(date -u +%T) timeline" >> "$S"
timeout 60 python3 $D/timeline.py 2>&1 | grep -v -i warn >> "$S"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
