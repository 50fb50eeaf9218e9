#!/usr/bin/env bash
# The sanitizer pass scripts/test.sh runs after the main suite: an AddressSanitizer +
# UndefinedBehaviorSanitizer build (the `asan` preset, build-asan/, -O1 and line tables only so
# it compiles quickly) of the unit, grammar, tokenizer and server test binaries, and a run of
# their in-process cases: every unit case (the safetensors fuzz loop's "never reads out of
# bounds" claim among them), the grammar and tokenizer/chat/sampler cases, and the server cases
# on the fake engine. The daemon-on-a-model, batching and load cases (a k3serve child on the
# tiny model) are left to the main suite: under ASan they take most of the time and add no code
# the in-process cases do not reach. Any sanitizer report fails the case that triggered it.
#   bash scripts/sanitize.sh            # configure, build, run
#   K3_SANITIZE_TESTS='weights: .*fuzz' bash scripts/sanitize.sh   # another ctest -R selection
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset asan >/dev/null
cmake --build --preset asan --target tests_weights tests_synthetic tests_sampling tests_chat tests_grammar tests_tokenizer \
  tests_cli tests_server
cd build-asan
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --output-on-failure --no-tests=error -j"${K3_TEST_JOBS:-2}" --timeout 600 \
  -R "${K3_SANITIZE_TESTS:-^((weights|synthetic|sampling|chat|grammar|tokenizer|server): |cli: (verify|inspect))}" \
  -E "${K3_SANITIZE_EXCLUDE:-^server: (tiny model|load|parallel 4):}"
