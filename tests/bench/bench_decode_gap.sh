#!/usr/bin/env bash
# Other streams during a long prompt's prefill (docs/performance.md, "Other streams during a
# prefill"): a stream decodes on the demo model while a long prompt is read in one pass, and the
# longest gap between the stream's tokens during that prefill is measured, in one run, for:
#   whole    the pass runs on its own and nothing steps between its layers (--decode-wait-s 0 and
#            --interleave-tokens as large as the pass): the stream waits for the whole pass;
#   cut      the old rule (--decode-wait-s 0, --interleave-tokens 64): the prompt goes in 64-token
#            passes beside the stream's decode steps, each pass reading the weights again;
#   layers   the pass runs whole and the stream steps between its layers (--decode-wait-s S).
# Printed: each mode's longest gap, the long prompt's time to its first token, the ratios, the
# two requests' texts compared across modes (they must be identical), and the load average.
#
#   bash tests/bench/bench_decode_gap.sh [K3SERVE] [PROMPT_TOKENS] [WAIT_S]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export K3SERVE_BIN=${1:-$here/../../build/k3serve}
tokens=${2:-2048}
wait_s=${3:-0.25}
threads=${K3_BENCH_THREADS:-2}
work=${K3_BENCH_DIR:-/tmp/k3-bench-decode-gap}
mkdir -p "$work"
source "$here/daemon_lib.sh"
BIN=$K3SERVE_BIN
model=$(demo_model "$work/demo")
trap stop_daemon EXIT

# One mode: prints "<longest gap s> <long prompt's seconds to its answer> <stream tokens during it>"
# and leaves both texts in $work/texts-<mode>.
measure() {
  local mode=$1
  shift
  start_daemon "$model" --threads "$threads" --parallel 2 --prefill-mb 4000 --draft-max 0 --prompt-cache-gb 0 "$@"
  python3 - "$DAEMON_PORT" "$tokens" "$work/texts-$mode" <<'EOF'
import http.client, json, sys, threading, time
port, n, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
arrivals, short_text = [], []
def stream():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    body = {"prompt": "The sea", "max_tokens": 100000, "temperature": 0, "ignore_eos": True, "stream": True}
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    for line in r:
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        j = json.loads(line[6:])
        if j.get("choices") and j["choices"][0].get("text"):
            arrivals.append(time.monotonic())
            short_text.append(j["choices"][0]["text"])
        if stop.is_set():
            break
stop = threading.Event()
t = threading.Thread(target=stream, daemon=True)
t.start()
while len(arrivals) < 8:
    time.sleep(0.01)
prompt = [1 + (i * 37) % 4000 for i in range(n)]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
t0 = time.monotonic()
c.request("POST", "/v1/completions", json.dumps({"prompt": prompt, "max_tokens": 1, "temperature": 0}),
          {"Content-Type": "application/json"})
long_text = json.loads(c.getresponse().read())["choices"][0]["text"]
t1 = time.monotonic()
stop.set()
during = [a for a in arrivals if t0 <= a <= t1]
edges = [t0] + during + [t1]
gap = max(b - a for a, b in zip(edges, edges[1:]))
# the stream's text so far and the long prompt's answer: the same in every mode (one text a
# prefix of the other, as the stream stops at a different point)
open(out, "w").write(json.dumps(["".join(short_text), long_text]))
print(f"{gap:.3f} {t1 - t0:.3f} {len(during)}")
EOF
  stop_daemon
}

echo "decode gaps during a ${tokens}-token prefill on the demo model ($(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg), $threads threads)"
read -r whole_gap whole_t whole_n < <(measure whole --decode-wait-s 0 --interleave-tokens 1048576)
read -r cut_gap cut_t cut_n < <(measure cut --decode-wait-s 0 --interleave-tokens 64)
read -r layer_gap layer_t layer_n < <(measure layers --decode-wait-s "$wait_s")
printf '  whole pass, nothing between layers:  longest gap %7.3f s, prompt answered in %7.2f s (%d stream tokens meanwhile)\n' "$whole_gap" "$whole_t" "$whole_n"
printf '  64-token passes (old rule):          longest gap %7.3f s, prompt answered in %7.2f s (%d stream tokens meanwhile)\n' "$cut_gap" "$cut_t" "$cut_n"
printf '  whole pass, --decode-wait-s %-6s  longest gap %7.3f s, prompt answered in %7.2f s (%d stream tokens meanwhile)\n' "$wait_s" "$layer_gap" "$layer_t" "$layer_n"
printf '  longest gap: whole / layers %.1fx; prompt time: cut / layers %.2fx, layers / whole %.2fx\n' \
  "$(python3 -c "print($whole_gap / $layer_gap)")" "$(python3 -c "print($cut_t / $layer_t)")" "$(python3 -c "print($layer_t / $whole_t)")"
echo "  load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work"/texts-{whole,cut,layers} <<'EOF'
import json, sys
texts = [json.load(open(p)) for p in sys.argv[1:]]
same_long = all(t[1] == texts[0][1] for t in texts)
shortest = min(len(t[0]) for t in texts)
same_stream = shortest > 0 and all(t[0][:shortest] == texts[0][0][:shortest] for t in texts)
print(f"  the long prompt's answer identical in the three modes: {same_long}; the stream's text (first {shortest} chars): {same_stream}")
sys.exit(0 if same_long and same_stream else 1)
EOF
