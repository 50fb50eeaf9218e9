#!/usr/bin/env bash
# The sanitizer pass scripts/test.sh runs after the main suite: an AddressSanitizer +
# UndefinedBehaviorSanitizer build (the `asan` preset, build-asan/, -O1 and line tables only so
# it compiles quickly) of the unit and server test binaries, and a run of the parts that
# exercise bounds: every unit case (the safetensors fuzz loop's "never reads out of bounds"
# claim among them) and the in-process server cases (fake engine; the daemon-on-a-model cases
# are left to the main suite). Any sanitizer report fails the test that triggered it.
#   bash scripts/sanitize.sh            # configure, build, run
#   K3_SANITIZE_TESTS='unit: .*fuzz' bash scripts/sanitize.sh   # another ctest -R selection
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset asan >/dev/null
cmake --build --preset asan --target tests_unit tests_server
cd build-asan
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --output-on-failure -j"${K3_TEST_JOBS:-2}" --timeout 600 \
  -R "${K3_SANITIZE_TESTS:-^(unit: |server: )}" -E "${K3_SANITIZE_EXCLUDE:-^server: (tiny model|load):}"
