#!/usr/bin/env bash
# Session 33, call 7 (a prebuilt binary: `ramp`, branch walk-ramp, experiment): can a phase that
# starts in step help the shorter launches too? CTA L of wave w = L / R takes the phase
# (L mod R) · count / R · min(w, W) / W (VSA_WALK_RAMP = W; 0: no ramp, main's phase), so a
# launch's first waves, which start together, walk nearly in list order and the later ones take
# the whole phase. Forward of NK2160 top-216 at H2, H4, H8 and H24 (8, 16, 33 and 98 waves),
# VSA_CUDA_WALK_PHASE=off against on with W = 0, 8 and 16; one round (the session's device time).
# Predicted (docs/kernel-notes.md): W = 8: H2 −0 to +3 % against off (on, W = 0: +5 %), H4 −2 to
# −4 %, H8 −5 to −7 %, H24 as W = 0 (−12 to −14 %); W = 16 between W = 8 and list order on H2-H8.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
gunzip -c .gpubin/bin/kb-ramp.gz > /tmp/kb && chmod +x /tmp/kb
for KB in "2 2160 216 128 64 0 1 4" "4 2160 216 128 64 0 1 2" "8 2160 216 128 64 0 1 2" "24 2160 216 128 64 0 1 1"; do
  echo "$(date -u +%T) off    $KB: $(VSA_CUDA_WALK_PHASE=off timeout 60 /tmp/kb $KB 2>&1 | tail -n 1)" >> "$S"
  for W in 0 8 16; do
    echo "$(date -u +%T) on W=$W $KB: $(VSA_CUDA_WALK_PHASE=on VSA_WALK_RAMP=$W timeout 60 /tmp/kb $KB 2>&1 | tail -n 1)" >> "$S"
  done
done
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
