#!/usr/bin/env bash
# Fault: a weight shard is truncated while the daemon serves with a streaming budget (experts
# read from disk per token). The request that hits it fails with a 500 naming the file, /health
# turns 503 model_unhealthy (so an orchestrator restarts it), and the daemon keeps answering.
#   tests/bench/fault_truncated_shard.sh [PRESET=tiny]
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/daemon_lib.sh
preset=${1:-tiny}
dir=$(mktemp -d /tmp/k3fault.XXXXXX)
trap 'stop_daemon; rm -rf "$dir"' EXIT
"$BIN" make-model "$dir/model" --preset "$preset" >/dev/null
# A budget far below the model: the trunk and experts stream from the shards.
start_daemon "$dir/model" --log-level warn --trunk-gb 0.0006 --cache-gb 0.0001
port=$DAEMON_PORT
ask() { curl -s -w '\n%{http_code}' -H 'Content-Type: application/json' "http://127.0.0.1:$port/v1/completions" \
  -d "{\"prompt\": \"$1\", \"max_tokens\": 4, \"ignore_eos\": true}"; }
first=$(ask "warm up")
[ "$(echo "$first" | tail -1)" = 200 ] || { echo "FAIL: warm-up request: $first"; exit 1; }
for shard in "$dir"/model/*.safetensors; do
  truncate -s $(( $(stat -c %s "$shard") / 2 )) "$shard"
done
answer=$(ask "a different prompt to read the weights again")
status=$(echo "$answer" | tail -1)
echo "after truncation: HTTP $status: $(echo "$answer" | head -1 | cut -c1-300)"
[ "$status" = 500 ] || { echo "FAIL: expected 500"; exit 1; }
echo "$answer" | head -1 | grep -q 'safetensors' || { echo "FAIL: the error does not name the file"; exit 1; }
health=$(curl -s -w '\n%{http_code}' "http://127.0.0.1:$port/health")
echo "/health: $(echo "$health" | tr '\n' ' ' | cut -c1-300)"
[ "$(echo "$health" | tail -1)" = 503 ] && echo "$health" | grep -q model_unhealthy || { echo "FAIL: /health"; exit 1; }
kill -0 "$DAEMON_PID" || { echo "FAIL: the daemon died"; exit 1; }
echo "PASS"
