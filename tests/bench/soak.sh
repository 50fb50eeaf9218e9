#!/usr/bin/env bash
# Soak: steady mixed load (streams, dribblers, idle keep-alives) for SECONDS against the demo
# model, sampling the daemon's RSS and thread count every 10 s into a CSV. After the warm-up
# (the first 10% of the run, at least 60 s) both must stay within 5% of their post-warm-up value.
#   tests/bench/soak.sh [SECONDS=1800] [MODEL_DIR] [CSV=soak.csv]
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/daemon_lib.sh
seconds=${1:-1800}
model=$(demo_model "${2:-}")
csv=${3:-soak.csv}
trap 'stop_daemon; kill $load_pid 2>/dev/null || true' EXIT
start_daemon "$model" --log-level warn
echo "soak: ${seconds} s on $model (pid $DAEMON_PID, port $DAEMON_PORT), samples in $csv"
python3 tests/bench/load_hardening.py --port "$DAEMON_PORT" --streams 8 --dribblers 16 --idle 16 \
  --max-tokens 24 --duration "$seconds" --time-limit $((seconds + 300)) --json "$csv.load.json" >"$csv.load.log" 2>&1 &
load_pid=$!
echo "t_s,rss_kb,threads,fds,load1" >"$csv"
start=$(date +%s)
while kill -0 "$load_pid" 2>/dev/null; do
  now=$(( $(date +%s) - start ))
  rss=$(awk '/^VmRSS/ {print $2}' /proc/$DAEMON_PID/status)
  threads=$(awk '/^Threads/ {print $2}' /proc/$DAEMON_PID/status)
  fds=$(ls /proc/$DAEMON_PID/fd | wc -l)
  echo "$now,$rss,$threads,$fds,$(cut -d' ' -f1 /proc/loadavg)" >>"$csv"
  sleep 10
done
wait "$load_pid" && load_ok=1 || load_ok=0
tail -25 "$csv.load.log"
python3 - "$csv" "$seconds" "$load_ok" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
warm = max(60, 0.1 * float(sys.argv[2]))
after = [r for r in rows if float(r["t_s"]) >= warm]
ok = sys.argv[3] == "1"
if len(after) < 2:
    print("soak: too short to judge (need samples after the warm-up)"); sys.exit(1)
for key in ("rss_kb", "threads"):
    vals = [float(r[key]) for r in after]
    base = vals[0]
    spread = (max(vals) - base) / base * 100
    print(f"soak: {key} after warm-up {base:.0f} -> max {max(vals):.0f}, min {min(vals):.0f} ({spread:+.1f}%)")
    ok &= max(vals) <= base * 1.05
print("soak RESULT:", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
