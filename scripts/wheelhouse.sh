#!/usr/bin/env bash
# Fills .wheels/ (ignored by git) with the pinned diffusers of pyproject.toml's
# `diffusers` extra and every package it needs, as wheels for the GPU machine's
# Python (3.12, manylinux x86_64). That machine has no network: carry .wheels/
# there, and the `diffusers` stage of scripts/gpu.sh installs from it with
# `pip install --no-index --find-links .wheels`, which takes a wheel only for
# what the machine lacks.
#
#   bash scripts/wheelhouse.sh          # here, where PyPI is reachable
#
# Left out: numpy (the GPU machine has it, and its wheel is the largest).
# WHEELHOUSE_PYTHON picks another target Python version (default 3.12).
set -euo pipefail
cd "$(dirname "$0")/.."
out=.wheels
python_version=${WHEELHOUSE_PYTHON:-3.12}
abi=cp${python_version/./}
skip="numpy"

requirement=$(python3 -c 'import tomllib
print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["diffusers"])')
target=(--only-binary=:all: --python-version "$python_version" --implementation cp --abi "$abi"
        --abi abi3 --abi none --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
        --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# What pip would install on a bare Python of that version: the whole closure, pinned.
python3 -m pip install --quiet --dry-run --ignore-installed --report "$work/report.json" \
  --target "$work/target" "${target[@]}" "$requirement"
python3 - "$work/report.json" "$skip" > "$work/pins.txt" <<'EOF'
import json, sys
skip = set(sys.argv[2].split())
for item in json.load(open(sys.argv[1]))["install"]:
    meta = item["metadata"]
    if meta["name"].lower() not in skip:
        print(f"{meta['name']}=={meta['version']}")
EOF

rm -rf "$out"
python3 -m pip download --quiet --no-deps "${target[@]}" -d "$out" -r "$work/pins.txt"
echo "$requirement" > "$out/REQUIREMENT"
ls "$out"
du -sh "$out"
