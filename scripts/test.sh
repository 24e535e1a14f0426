#!/usr/bin/env bash
# Installs what the tests need and runs them all: the C++ suite (CTest, with
# the CUDA code compiled for every listed arch when nvcc is present), the same
# suite on the CPU backend under ASan + UBSan, a bounded fuzz run, and the
# Python suite (pytest). GPU tests skip themselves on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_system_deps.sh
python3 -m pip install -q -r requirements/test.txt

cmake --preset ci
cmake --build --preset ci
ctest --preset ci

# The CPU backend and the C++ tests again, under AddressSanitizer and
# UndefinedBehaviorSanitizer (a CPU-only build: the sanitizers see host code).
cmake --preset asan
cmake --build --preset asan
ctest --preset asan

# A bounded fuzz run (clang's libFuzzer) of the argument checks and the CPU
# backend from the committed corpus: tests/fuzz/README.md.
cmake --preset fuzz
cmake --build --preset fuzz
ctest --preset fuzz
grep -h "stat::number_of_executed_units" build/fuzz/Testing/Temporary/LastTest.log || true

# Without a GPU the extension's CUDA kernels could not run, so the Python
# build skips them (the C++ build above already compiled them for all archs).
cuda=OFF
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then cuda=AUTO; fi
# Before its rename to vsa-attention this distribution was called `vsa`; such an
# install left on the machine would claim the same files, so it goes first.
if python3 -m pip show vsa 2>/dev/null | grep -q "^Summary: Block-sparse attention"; then
  python3 -m pip uninstall -y -q vsa
fi
# The `diffusers` extra brings the pinned diffusers for tests/python/test_diffusers_wan.py.
python3 -m pip install -q --no-build-isolation ".[diffusers]" -C cmake.define.VSA_ENABLE_CUDA=$cuda -C build-dir=build/py
python3 -m pytest tests/python -q -p no:cacheprovider
