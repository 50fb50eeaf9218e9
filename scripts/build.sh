#!/usr/bin/env bash
# Configures and builds k3serve into build/ (RelWithDebInfo, portable: no -march=native).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j"$(nproc)"
