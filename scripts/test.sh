#!/usr/bin/env bash
# The whole test suite from a fresh clone: install dependencies, build,
# run every test (C++ doctest cases, the Python reference checks, the Node.js client and browser
# tests), all registered with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# Warnings are errors (K3_WERROR), as in the ci preset: the whole tree, tests and benchmarks
# included, builds warning-free with Debian 12's GCC 12 (clang is not needed for it).
bash scripts/build.sh -DK3_WERROR=ON
if [ -f tests/node/package.json ]; then
  (cd tests/node && npm install --no-audit --no-fund --loglevel=error)
fi
# The fuzz label is part of the run: its fuzz_build entry builds the libFuzzer targets with
# clang + ASan/UBSan into build/fuzz (scripts/fuzz.sh build, a few minutes holding both cores),
# then each target runs 5 s from its seed corpus.
# No test is run twice: a test that waits on time instead of a state is a defect to fix, and a
# retry would hide it (docs/development.md, "Tests wait on states").
(cd build && ctest --output-on-failure -j"${K3_TEST_JOBS:-2}" --timeout 1200)
# Then the sanitizer pass (scripts/sanitize.sh, build-asan/): an ASan + UBSan build of the unit,
# grammar, tokenizer and server test binaries and a run of their in-process cases; any report
# fails the case that triggered it. About 10 minutes on two cores.
bash scripts/sanitize.sh
