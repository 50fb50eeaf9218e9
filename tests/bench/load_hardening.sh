#!/usr/bin/env bash
# The hardening load run (docs/operations.md): 64 streaming clients + 64 header-dribbling connections + 64 idle keep-alives
# + an idle flood of 256 silent sockets from four loopback addresses against the demo
# model on loopback. Every generation completes or gets 503 + Retry-After,
# /health answers within 1 s throughout; TTFT p50/p95 and the load average are printed.
#   tests/bench/load_hardening.sh [MODEL_DIR] [load_hardening.py flags, e.g. --requests 3]
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/daemon_lib.sh
model=$(demo_model "${1:-}")
[ $# -gt 0 ] && shift
trap stop_daemon EXIT
start_daemon "$model" --log-level warn
echo "daemon pid $DAEMON_PID on port $DAEMON_PORT, model $model, load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 tests/bench/load_hardening.py --port "$DAEMON_PORT" --silent 256 "$@"
