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
# The fuzz label is part of the run: its fuzz_build entry builds the libFuzzer targets with
# clang + ASan/UBSan into build/fuzz (scripts/fuzz.sh build, a few minutes holding both cores),
# then each target runs 5 s from its seed corpus.
# A test that fails is run once more (--repeat until-pass:2): a daemon test on a machine this
# busy can lose a timing race once; its first failure stays in the output to be looked at.
(cd build && ctest --output-on-failure -j"${K3_TEST_JOBS:-2}" --timeout 1200 --repeat until-pass:2)
