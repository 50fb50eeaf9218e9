#!/usr/bin/env bash
# Soak: steady mixed load (streams, dribblers, idle keep-alives, an idle flood of 256 silent
# sockets from four loopback addresses) for SECONDS against the demo
# model, sampling the daemon's RSS, thread count and prompt cache size every 10 s into a CSV.
# After the warm-up (the first 10% of the run, at least 60 s) the RSS less the prompt cache and
# the thread count must stay within 5% of their post-warm-up value. The prompt cache (the
# finished conversations' states, kept on purpose up to --prompt-cache-gb, 1 GB by default) is
# memory held by design: it fills for many minutes, so it is reported beside the RSS, and
# judged only against its budget.
# A small budget (e.g. --prompt-cache-gb 0.1) fills within the warm-up, so the whole run after
# it is the steady state of a long-lived daemon: a full cache evicting as it inserts.
#   tests/bench/soak.sh [SECONDS=1800] [MODEL_DIR] [CSV=soak.csv] [serve flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/daemon_lib.sh
seconds=${1:-1800}
model=$(demo_model "${2:-}")
csv=${3:-soak.csv}
shift $(( $# < 3 ? $# : 3 ))
trap 'stop_daemon; kill $load_pid 2>/dev/null || true' EXIT
start_daemon "$model" --log-level warn "$@"
echo "soak: ${seconds} s on $model (pid $DAEMON_PID, port $DAEMON_PORT), samples in $csv"
python3 tests/bench/load_hardening.py --port "$DAEMON_PORT" --streams 8 --dribblers 16 --idle 16 --silent 256 \
  --max-tokens 24 --duration "$seconds" --time-limit $((seconds + 300)) --json "$csv.load.json" >"$csv.load.log" 2>&1 &
load_pid=$!
echo "t_s,rss_kb,threads,fds,load1,prompt_cache_kb,rss_less_cache_kb,prompt_cache_budget_kb" >"$csv"
metric() {  # metric NAME: the daemon's /metrics gauge in kB (0 when it cannot be read)
  curl -s --max-time 5 "http://127.0.0.1:$DAEMON_PORT/metrics" | awk -v n="$1" '$1 == n {printf "%d", $2 / 1024; f = 1} END {if (!f) print 0}'
}
start=$(date +%s)
while kill -0 "$load_pid" 2>/dev/null; do
  now=$(( $(date +%s) - start ))
  rss=$(awk '/^VmRSS/ {print $2}' /proc/$DAEMON_PID/status)
  threads=$(awk '/^Threads/ {print $2}' /proc/$DAEMON_PID/status)
  fds=$(ls /proc/$DAEMON_PID/fd | wc -l)
  cache=$(metric k3serve:prompt_cache_bytes)
  echo "$now,$rss,$threads,$fds,$(cut -d' ' -f1 /proc/loadavg),$cache,$((rss - cache)),$(metric k3serve:prompt_cache_budget_bytes)" >>"$csv"
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
for key in ("rss_less_cache_kb", "threads", "rss_kb", "prompt_cache_kb"):
    vals = [float(r[key]) for r in after]
    base = vals[0]
    spread = (max(vals) - base) / base * 100 if base else 0.0
    print(f"soak: {key} after warm-up {base:.0f} -> max {max(vals):.0f}, min {min(vals):.0f}, last {vals[-1]:.0f} ({spread:+.1f}%)")
    if key in ("rss_less_cache_kb", "threads"):
        ok &= max(vals) <= base * 1.05
budget = max(float(r["prompt_cache_budget_kb"]) for r in rows)
cache_max = max(float(r["prompt_cache_kb"]) for r in rows)
print(f"soak: prompt cache at most {cache_max:.0f} kB of its {budget:.0f} kB budget")
ok &= cache_max <= budget
print("soak RESULT:", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
