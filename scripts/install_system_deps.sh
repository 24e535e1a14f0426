#!/usr/bin/env bash
# Installs the system packages the build needs when they are missing (Debian):
# a C++20 compiler, CMake, Ninja, GoogleTest, and OpenBLAS with pkg-config
# (the CPU backend's matrix products); and for the fuzz preset
# clang with its runtime libraries (libFuzzer, the sanitizers) and LLVM's
# symbolizer for readable crash reports. Needs root to install.
set -euo pipefail
missing=()
command -v g++ >/dev/null || missing+=(g++)
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
[[ -f /usr/include/gtest/gtest.h ]] || missing+=(libgtest-dev)
command -v pkg-config >/dev/null || missing+=(pkg-config)
pkg-config --exists openblas 2>/dev/null || missing+=(libopenblas-dev)
command -v clang++ >/dev/null || missing+=(clang)
compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null || missing+=(libclang-rt-dev)
command -v llvm-symbolizer >/dev/null || missing+=(llvm)
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  apt-get update -q
  apt-get install -y -q "${missing[@]}"
fi
