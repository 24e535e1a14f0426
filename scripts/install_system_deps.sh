#!/usr/bin/env bash
# Installs the system packages the build needs when they are missing (Debian):
# a C++20 compiler, CMake, Ninja and GoogleTest. Needs root to install.
set -euo pipefail
missing=()
command -v g++ >/dev/null || missing+=(g++)
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
[[ -f /usr/include/gtest/gtest.h ]] || missing+=(libgtest-dev)
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  apt-get update -q
  apt-get install -y -q "${missing[@]}"
fi
