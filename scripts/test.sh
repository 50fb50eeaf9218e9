#!/usr/bin/env bash
# The whole test suite from a fresh clone: install dependencies, build,
# run every test (C++ doctest cases, the Python reference checks, the Node.js client and browser
# tests), all registered with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# Warnings are errors in the ci preset (K3_WERROR); not yet here: GCC 12 reports a false
# -Wrestrict in server/http.cpp at -O3, and the whole tree (benchmarks included) has not been
# seen warning-free with it. Turn it on here once it has.
bash scripts/build.sh
if [ -f tests/node/package.json ]; then
  (cd tests/node && npm install --no-audit --no-fund --loglevel=error)
fi
# The fuzz label (a clang + ASan build of the fuzz targets, then 5 s per target) is run with
# `ctest -L fuzz` or scripts/fuzz.sh: its build was not verified on the final tree of the
# session that added it, so it is kept out of the default run until it has passed once.
# A test that fails is run once more (--repeat until-pass:2): a daemon test on a machine this
# busy can lose a timing race once; its first failure stays in the output to be looked at.
(cd build && ctest --output-on-failure -j"${K3_TEST_JOBS:-2}" --timeout 1200 -LE '^fuzz$' --repeat until-pass:2)
