#!/usr/bin/env bash
# The prefill pipeline on k3-mini at the streamed budget (trunk 0.3 GB, cache 0.1 GB), this build
# against another one in the same run (docs/performance.md, "Prefill pipeline"): for a prompt of
# N tokens in one chunk, the prefill time, the run report's time waiting on reads (trunk and
# experts) as a share of it, the bytes read and the expert reads issued ahead; then the same
# prompt with every weight resident (the compute alone) and the streamed prefill's ratio to it.
#
#   bash tests/bench/bench_prefill_pipeline.sh K3_MINI_DIR BASELINE_K3SERVE [THIS_K3SERVE]
#
# K3_MINI_DIR from `k3serve make-model DIR --preset k3-mini`. K3_BENCH_TOKENS (default "512")
# lists the prompt lengths. The binaries alternate, so a load change on a shared machine hits
# both; the load average is printed with the figures. The page cache is not dropped (the engine
# reads with O_DIRECT where the file system allows it, docs/architecture.md).
set -euo pipefail
model=${1:?usage: $0 K3_MINI_DIR BASELINE_K3SERVE [THIS_K3SERVE]}
base=${2:?usage: $0 K3_MINI_DIR BASELINE_K3SERVE [THIS_K3SERVE]}
this=${3:-$(dirname "$0")/../../build/k3serve}
work=${K3_BENCH_DIR:-/tmp/k3-bench-prefill-pipeline}
threads=${K3_BENCH_THREADS:-2}
mkdir -p "$work"
ids_of() { python3 -c "import sys; n=int(sys.argv[1]); print(','.join(str(1 + (i * 37) % 4000) for i in range(n)))" "$1"; }

# One prefill in one chunk; prints "prefill_s wait_s GB_read prefetch_reads prefetch_hits first_id".
prefill() {
  local bin=$1 n=$2 tag=$3; shift 3
  "$bin" run "$model" --ids "$(ids_of "$n")" --gen 1 --threads "$threads" --prefill-mb 4000 \
    --report "$work/report-$tag.json" "$@" > "$work/out-$tag.txt" 2>&1
  python3 - "$work/report-$tag.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
wait = r.get('trunk_wait_seconds', 0) + r.get('expert_wait_seconds', 0)
gb = (r.get('trunk_bytes_read', 0) + r.get('expert_bytes_read', 0)) / 1e9
print(r['prefill_seconds'], wait, gb, r.get('expert_prefetch_reads', 0), r.get('expert_prefetch_hits', 0),
      r['generated_ids'][0])
EOF
}

echo "prefill pipeline, k3-mini streamed ($(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg), $threads threads)"
for n in ${K3_BENCH_TOKENS:-512}; do
  for who in base this; do
    bin=$base; [ "$who" = this ] && bin=$this
    read -r s w g pr ph id < <(prefill "$bin" "$n" "$who-$n" --trunk-gb 0.3 --cache-gb 0.1)
    printf '  %5d tokens %-8s prefill %8.2f s  waiting on reads %7.2f s (%4.1f%%)  read %6.2f GB  read ahead %5d (%d used)  first id %s\n' \
      "$n" "$who" "$s" "$w" "$(python3 -c "print(100 * $w / $s)")" "$g" "$pr" "$ph" "$id"
    eval "s_$who=$s; id_$who=$id"
  done
  read -r r _ _ _ _ id_res < <(prefill "$this" "$n" "resident-$n")
  printf '  %5d tokens resident prefill %8.2f s (compute alone): streamed this / resident %.2fx, baseline / resident %.2fx\n' \
    "$n" "$r" "$(python3 -c "print($s_this / $r)")" "$(python3 -c "print($s_base / $r)")"
  if [ "$id_base" != "$id_this" ] || [ "$id_this" != "$id_res" ]; then
    echo "  FAIL: first ids differ: baseline $id_base, this $id_this, resident $id_res"
    exit 1
  fi
done
echo "  load after: $(cut -d' ' -f1-3 /proc/loadavg)"
