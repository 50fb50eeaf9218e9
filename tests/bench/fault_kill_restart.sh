#!/usr/bin/env bash
# Fault: SIGKILL the daemon in the middle of a stream, then start it again on the same port. The
# client sees a stream cut short (no [DONE]), the new daemon answers /health and serves a full
# completion.   tests/bench/fault_kill_restart.sh [MODEL_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/daemon_lib.sh
model=$(demo_model "${1:-}")
trap stop_daemon EXIT
start_daemon "$model" --log-level warn
port=$DAEMON_PORT
out=$(mktemp)
curl -sN -H 'Content-Type: application/json' "http://127.0.0.1:$port/v1/completions" \
  -d '{"prompt": "Once upon a time", "max_tokens": 400, "stream": true, "ignore_eos": true}' >"$out" 2>/dev/null &
curl_pid=$!
for _ in $(seq 1 100); do grep -q '"text"' "$out" && break; sleep 0.1; done
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
wait "$curl_pid" 2>/dev/null || true
events=$(grep -c '^data: {' "$out" || true)
if grep -q 'data: \[DONE\]' "$out"; then echo "FAIL: the stream finished before the kill"; exit 1; fi
echo "killed mid-stream after $events events (no [DONE], as it should be)"
t0=$(date +%s.%N)
"$BIN" serve "$model" --host 127.0.0.1 --port "$port" --log-level warn 2>>"$DAEMON_LOG" &
DAEMON_PID=$!
for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.1; done
ready=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN {printf "%.2f", a - b}')
answer=$(curl -s -H 'Content-Type: application/json' "http://127.0.0.1:$port/v1/completions" \
  -d '{"prompt": "Once upon a time", "max_tokens": 8}')
echo "$answer" | grep -q '"finish_reason"' || { echo "FAIL: no completion after restart: $answer"; exit 1; }
echo "restarted on port $port, ready in ${ready} s, completion served: PASS"
