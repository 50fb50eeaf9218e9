#!/usr/bin/env bash
# Long-prompt prefill on the long-context test model (the demo preset with its context raised to
# 64k tokens), this build against another one in the same run (docs/performance.md, "Long
# prompts"): the time of a 2,048- and a 16,384-token prefill for each binary, the ratio of the
# two binaries at 16k (the blocked attention's gain), how each scales from 2k to 16k, and the
# generated ids of one prompt evaluated in one chunk and in many (they must be identical).
#
#   bash tests/bench/bench_long_prefill.sh BASELINE_K3SERVE [THIS_K3SERVE]
#
# BASELINE_K3SERVE: a k3serve built from the commit to compare with (e.g. main before the change,
# built beside this tree). Each prefill runs once per binary, the binaries alternating, so a load
# change on a shared machine hits both; the load average is printed with the figures.
set -euo pipefail
base=${1:?usage: $0 BASELINE_K3SERVE [THIS_K3SERVE]}
this=${2:-$(dirname "$0")/../../build/k3serve}
work=${K3_BENCH_DIR:-/tmp/k3-bench-long-prefill}
threads=${K3_BENCH_THREADS:-2}
mkdir -p "$work"
model=$work/demo-64k
if [ ! -f "$model/config.json" ]; then
  "$this" make-model "$model" --preset demo >/dev/null
  python3 - "$model/config.json" <<'EOF'
import json, sys
path = sys.argv[1]
c = json.load(open(path))
(c.get("text_config") or c)["max_position_embeddings"] = 65536
json.dump(c, open(path, "w"), indent=2)
EOF
fi
ids_of() { python3 -c "import sys; n=int(sys.argv[1]); print(','.join(str(1 + (i * 37) % 4000) for i in range(n)))" "$1"; }

# One prefill: prints its seconds (the run report's prefill_seconds) and leaves the ids in $work/ids-*.
prefill() {
  local bin=$1 n=$2 tag=$3; shift 3
  "$bin" run "$model" --ids "$(ids_of "$n")" --gen 4 --threads "$threads" --report "$work/report-$tag.json" "$@" \
    > "$work/out-$tag.txt" 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['prefill_seconds']); open(sys.argv[2],'w').write(' '.join(map(str, r['generated_ids'])))" \
    "$work/report-$tag.json" "$work/ids-$tag"
}

echo "long-context prefill ($(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg), $threads threads)"
declare -A t
for n in 2048 16384; do
  t[base-$n]=$(prefill "$base" "$n" "base-$n")
  t[this-$n]=$(prefill "$this" "$n" "this-$n")
  printf '  %6d tokens: baseline %8.2f s   this %8.2f s   baseline/this %.2fx\n' "$n" "${t[base-$n]}" "${t[this-$n]}" \
    "$(python3 -c "print(${t[base-$n]} / ${t[this-$n]})")"
done
printf '  16k / 2k time: baseline %.1fx, this %.1fx (tokens 8x)\n' \
  "$(python3 -c "print(${t[base-16384]} / ${t[base-2048]})")" "$(python3 -c "print(${t[this-16384]} / ${t[this-2048]})")"

# One chunk (the whole 4k prompt) and many (64-token chunks): the same generated ids.
one=$(prefill "$this" 4096 one-chunk --prefill-mb 4000)
many=$(prefill "$this" 4096 many-chunks --prefill-mb 0.5)
if cmp -s "$work/ids-one-chunk" "$work/ids-many-chunks"; then
  printf '  4096 tokens in one chunk (%.2f s) and in small chunks (%.2f s): identical ids %s\n' "$one" "$many" "$(cat "$work/ids-one-chunk")"
else
  echo "  FAIL: one chunk gave $(cat "$work/ids-one-chunk"), many chunks $(cat "$work/ids-many-chunks")"
  exit 1
fi
echo "  load after: $(cut -d' ' -f1-3 /proc/loadavg)"
