#!/usr/bin/env bash
# Normal clients' token rate beside one slow reader and beside an idle flood (600 silent sockets
# and 200 slow request heads from four loopback addresses, kept standing), against the demo model
# (or MODEL_DIR) on loopback: beside a reader that stopped reading, every client's rate must stay
# within 20% of its rate beside the same request read normally, and beside the flood within 20%
# of its rate alone. Prints the rates, the ratios (the worst client's too) and the load average.
#   tests/bench/load_slow_reader.sh [MODEL_DIR] [load_slow_reader.py flags, e.g. --rounds 5]
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/daemon_lib.sh
model=$(demo_model "${1:-}")
[ $# -gt 0 ] && shift
trap stop_daemon EXIT
# Three slots: one for the slow reader, two for the normal clients batched beside it.
# No drafting: what the random model happens to repeat would change the rate from phase to
# phase; the bench measures only what the other clients cost.
start_daemon "$model" --log-level warn --parallel 3 --threads 1 --draft-max 0
echo "daemon pid $DAEMON_PID on port $DAEMON_PORT, model $model, load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 tests/bench/load_slow_reader.py --port "$DAEMON_PORT" "$@"
