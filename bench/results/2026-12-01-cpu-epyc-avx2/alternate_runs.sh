#!/bin/bash
# Alternating `vsa bench` runs of two installs (before / after a change), every run kept with the
# load average before and after it:
#   alternate_runs.sh TAG ROUNDS BASE_VENV NEW_VENV [vsa bench arguments]
# e.g. alternate_runs.sh c3 5 /work/venv-main /work/venv-branch --iters 10 --warmup 2
# writes TAG-{base,new}-N.log and TAG-{base,new}-N/results.json.
set -u
tag=$1 rounds=$2 base=$3 new=$4
shift 4
for i in $(seq 1 "$rounds"); do
  for who in base new; do
    venv=$base
    [ "$who" = new ] && venv=$new
    out=$tag-$who-$i
    {
      echo "# $(date -u +%FT%TZ) load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
      "$venv/bin/vsa" bench "$@" --out "$out" 2>&1
      echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    } > "$out.log"
  done
done
