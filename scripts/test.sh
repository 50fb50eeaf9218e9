#!/usr/bin/env bash
# The whole test suite from a fresh clone: install dependencies, build (warnings are errors),
# run every test (C++ doctest cases, the Python reference checks, the Node.js client and browser
# tests), all registered with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# Warnings are errors here (and in the ci preset), so CI refuses code that adds one.
bash scripts/build.sh -DK3_WERROR=ON
if [ -f tests/node/package.json ]; then
  (cd tests/node && npm install --no-audit --no-fund --loglevel=error)
fi
(cd build && ctest --output-on-failure -j"${K3_TEST_JOBS:-2}" --timeout 1200)
