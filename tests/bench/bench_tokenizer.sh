#!/usr/bin/env bash
# Tokenizer throughput, ours vs npm tiktoken (WASM build of the reference), same corpus, same
# run, and the ratio. Needs a build (bash scripts/build.sh) and tests/node installed.
#   bash tests/bench/bench_tokenizer.sh [BUILD_DIR]
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$src/build}"
[ -d "$src/tests/node/node_modules/tiktoken" ] || (cd "$src/tests/node" && npm install --no-audit --no-fund --loglevel=error)
ours="$("$build/tests/bench/bench_tokenizer" "$src")"
theirs="$(node "$src/tests/bench/bench_tokenizer.mjs")"
echo "$ours"
echo "$theirs"
rate() { echo "$1" | grep "$2" | sed -E 's/.*: ([0-9.]+) MB\/s.*/\1/'; }
for enc in kimi/o200k cl100k "typical kimi/o200k" "typical cl100k"; do
  a="$(rate "$ours" "k3 $enc:")"
  b="$(rate "$theirs" "tiktoken $enc:")"
  awk -v a="$a" -v b="$b" -v e="$enc" 'BEGIN { printf "ratio %s: k3 / tiktoken = %.2f (goal >= 1)\n", e, a / b }'
done
