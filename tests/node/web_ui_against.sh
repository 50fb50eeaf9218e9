#!/usr/bin/env bash
# Runs web UI tests against the web/ files of another commit (served with --web-dir, the daemon
# and the tests from this tree), to show that each test fails without the change it covers:
#   tests/node/web_ui_against.sh COMMIT [BUILD_DIR] [TEST_FILE...]
# TEST_FILE defaults to every tests/node/web_ui*.test.mjs; K3_TEST_PATTERN picks cases by name. Prints node's TAP summary lines per
# test ("ok"/"not ok" and the name). Not part of the suite: the old UI is expected to fail.
set -euo pipefail
commit=${1:?usage: web_ui_against.sh COMMIT [BUILD_DIR] [TEST_FILE...]}
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${2:-$source_dir/build}" && pwd)
shift $(( $# >= 2 ? 2 : 1 ))
files=("$@")
[ ${#files[@]} -gt 0 ] || files=("$source_dir"/tests/node/web_ui*.test.mjs)
web=$(mktemp -d)
trap 'rm -rf "$web"' EXIT
git -C "$source_dir" archive "$commit" web | tar -x -C "$web"
export K3_WEB_DIR="$web/web" K3SERVE_BIN="$build/k3serve" K3_FAKE_DAEMON="$build/tests/node/k3serve_fake_daemon"
export K3_SOURCE_DIR="$source_dir" K3_TEST_TMP="$build/test-tmp" K3_TEST_ARTIFACTS="$build/test-artifacts/against"
for f in "${files[@]}"; do
  echo "# $(basename "$f") against web/ of $(git -C "$source_dir" rev-parse --short "$commit")"
  # A case of the old UI may wait on a state it never reaches: the whole file gets 15 minutes.
  timeout 900 node --test --test-timeout=600000 --test-reporter=tap ${K3_TEST_PATTERN:+--test-name-pattern="$K3_TEST_PATTERN"} "$f" 2>&1 | grep --line-buffered -E '^ *(not )?ok [0-9]+ - |^ *error: ' || true
done
