#!/usr/bin/env bash
# Session 23, call 4: the device idle before the backward's first launch (calls 2 and 3: ~115–140
# µs after autograd's zero fill of lse's gradient, although the host was 4.7 ms ahead). Branch
# no-lse-zeros: the forward op's autograd no longer materializes the missing lse gradient (no fill
# kernel). gap_probe.py with it, then with main's attention.py put back (call-main-attention.py,
# a copy of main's python/vsa/attention.py); vsa bench's Wan backward new, main, new.
# Expected before the call: if the fill is what the device waits behind, the gap goes with it
# and vsa bench's Wan backward drops by ~0.1 ms; if not, the _C calls show where it lies.
set -uo pipefail
start=$SECONDS
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
D=bench/results/2026-12-03-h200-all-tma
VSA_COMMIT=$COMMIT bash scripts/gpu.sh python > /dev/null 2>&1
S="$OUT/summary-main.txt"; cp "$OUT/summary.txt" "$S"
SP=$(python3 -c "import vsa, os; print(os.path.dirname(vsa.__file__))")
cp "$SP/attention.py" /tmp/attention-new.py
bench() {
  timeout 90 vsa bench --case wan2.1-1.3b-480p --backends vsa --iters 30 --out "$OUT/b" > /tmp/b.log 2>&1
  echo "$1: $(grep -E '^  vsa' /tmp/b.log)" >> "$S"
}
echo "== $(date -u +%T) gap probe, new" >> "$S"
timeout 120 python3 $D/gap_probe.py 2>&1 | grep -v -i warn >> "$S"
bench new
cp call-main-attention.py "$SP/attention.py"
echo "== $(date -u +%T) gap probe, main's attention.py" >> "$S"
timeout 120 python3 $D/gap_probe.py 2>&1 | grep -v -i warn | grep -E "^autograd|^_C|^  sum|FillFunc|Memset" >> "$S"
bench main
cp /tmp/attention-new.py "$SP/attention.py"
bench new
rm -rf "$OUT/b"
echo "== $(date -u +%T) done ($((SECONDS - start)) s)" >> "$S"
