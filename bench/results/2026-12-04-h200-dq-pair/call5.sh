#!/usr/bin/env bash
# Session 31, call 5 (prebuilt binaries only; the session's last ~260 s of device time): the dQ
# pass with tile t's product issued before tile t − 1's is waited for (branch dq-overlap: two
# operand buffers, wgmma.wait_group 1; three stages, three CTAs as main). The backward GPU tests
# of the variant (a test binary built off the device), then main and the variant in turn, two
# rounds. Predicted (docs/kernel-notes.md): the dQ pass −10 to −15 %, H16 top-192 backward −2 to
# −4 %, Wan and top-64 −1 to −3 %.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
S="$OUT/summary-main.txt"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; } > "$S" 2>&1
for v in main ov3; do gunzip -c .gpubin/bin/kb-$v.gz > /tmp/kb-$v && chmod +x /tmp/kb-$v; done
gunzip -c .gpubin/bin/tests-ov3.gz > /tmp/tests-ov3 && chmod +x /tmp/tests-ov3
timeout 60 /tmp/tests-ov3 --gtest_filter='*Backward*' --gtest_brief=1 > "$OUT/tests-ov3.log" 2>&1
echo "C++ GPU backward tests, ov3: rc $? ($((SECONDS - start)) s)" >> "$S"
grep -E "^\[  PASSED|^\[  FAILED|tests ran|Failure" "$OUT/tests-ov3.log" | head -10 >> "$S"
echo "== $(date -u +%T) A/B, 8 calls a timing, Hopper backward (default)" >> "$S"
for r in 1 2; do
  for case in "16 768 192 128 64 0 2 8" "12 624 63 128 64 3 2 8" "16 768 64 128 64 0 2 8"; do
    for v in main ov3; do
      echo "$(date -u +%T) sm90 $v $case: $(timeout 30 /tmp/kb-$v $case 2>&1 | tail -n 1)" >> "$S"
    done
  done
done
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
