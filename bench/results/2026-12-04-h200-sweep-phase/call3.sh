#!/usr/bin/env bash
# Session 33, call 3 (call 2's `wp` binary): where does the forward's phased walk pay? Call 2 timed
# it −5.6 to −6.0 % on H8 NK2160 (33 waves of 528 CTAs), but the dQ pass, phased the same way,
# +4 to +5 % on that backward (+11 % under Nsight Compute, its K hit rate down): a dQ launch is
# one head, 5.5 waves of 396 CTAs, whose first wave starts all at once, in step at list order,
# where a phase by launch place spreads it. So the number of waves should decide. Forward
# `on` against `off`, two rounds: H1, H2, H4, H8 and H24 at NK2160 top-216 (4, 8, 16, 33 and 98
# waves), and H8 at NK1024 top-104 and NK1536 top-154 (K and V 32 and 48 MB a head, L2 50 MB).
# Predicted (docs/kernel-notes.md): H1 +3 to +10 %, H2 level to +5 %, H4 −0 to −4 %, H8 −5 to
# −7 %, H24 −6 to −11 %; NK1024 level, NK1536 −2 to −5 %.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,uuid --format=csv,noheader; } > "$S" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/smi.log" 2>&1 &
smi=$!
gunzip -c .gpubin/bin/kb-wp.gz > /tmp/kb && chmod +x /tmp/kb
for r in 1 2; do
  for KB in "1 2160 216 128 64 0 1 8" "2 2160 216 128 64 0 1 4" "4 2160 216 128 64 0 1 2" "8 2160 216 128 64 0 1 2" \
            "24 2160 216 128 64 0 1 1" "8 1024 104 128 64 0 1 4" "8 1536 154 128 64 0 1 2"; do
    for W in off on; do
      echo "$(date -u +%T) $W $KB: $(VSA_CUDA_WALK_PHASE=$W timeout 60 /tmp/kb $KB 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
kill $smi 2>/dev/null
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
