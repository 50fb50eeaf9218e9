#!/usr/bin/env bash
# A streamed prefill against its own bounds (docs/performance.md, "Prefill pipeline" and "Prefill
# passes"): k3-mini with the trunk streamed (--trunk-gb 0.3) and a 0.1 GB expert cache, a prompt of
# N tokens in the passes the plan gives it without --prefill-mb (K3_BENCH_PREFILL_MB=M passes
# --prefill-mb M), against the larger of
#   its read time: the bytes the run report says it read, at the disk's speed measured by `k3serve
#     plan` on the model's files just before (the trunk at the sequential figure, the experts at the
#     expert-sized random one: the engine's two read patterns), and
#   its compute time: the same prompt with every weight resident, in the same run;
# at most 1.15x, and the run report's time waiting on reads (trunk and experts) at most 2% of the
# prefill; the bytes read at most 1.1x the trunk's runs and 1.1x the routed expert pool (one pass
# reads each weight about once: the sizes from the shards' headers). The first generated id must
# be the same both ways.
#
#   bash tests/bench/bench_prefill_bound.sh K3_MINI_DIR [THIS_K3SERVE]
#
# K3_MINI_DIR from `k3serve make-model DIR --preset k3-mini`. K3_BENCH_TOKENS (default "512 2048")
# lists the prompt lengths. The streamed run goes first, then the resident one, length by length,
# each its own process; the load average is printed with every row (a shared machine: compare
# within a row).
set -euo pipefail
model=${1:?usage: $0 K3_MINI_DIR [THIS_K3SERVE]}
this=${2:-$(dirname "$0")/../../build/k3serve}
work=${K3_BENCH_DIR:-/tmp/k3-bench-prefill-bound}
threads=${K3_BENCH_THREADS:-2}
streamed=(--trunk-gb 0.3 --cache-gb 0.1)
mkdir -p "$work"
ids_of() { python3 -c "import sys; n=int(sys.argv[1]); print(','.join(str(1 + (i * 37) % 4000) for i in range(n)))" "$1"; }

pass_flags=()
[ -n "${K3_BENCH_PREFILL_MB:-}" ] && pass_flags=(--prefill-mb "$K3_BENCH_PREFILL_MB")
# One prefill in the plan's passes; the report in $work/report-TAG.json.
prefill() {
  local n=$1 tag=$2; shift 2
  "$this" run "$model" --ids "$(ids_of "$n")" --gen 1 --threads "$threads" "${pass_flags[@]}" \
    --report "$work/report-$tag.json" "$@" > "$work/out-$tag.txt" 2>&1
}
# The trunk's runs and the routed expert pool, in bytes, from the shards' headers.
read -r trunk_bytes pool_bytes < <(python3 - "$model" <<'PY'
import glob, json, struct, sys
trunk = pool = 0
for path in glob.glob(sys.argv[1] + '/*.safetensors'):
    with open(path, 'rb') as f:
        header = json.loads(f.read(struct.unpack('<Q', f.read(8))[0]))
    for name, t in header.items():
        if name == '__metadata__' or 'model.layers.' not in name: continue
        size = t['data_offsets'][1] - t['data_offsets'][0]
        if '.block_sparse_moe.experts.' in name: pool += size
        else: trunk += size
print(trunk, pool)
PY
)

echo "streamed prefill against its bounds, $model ($(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg), $threads threads, ${pass_flags[*]:-no --prefill-mb})"
fail=0
for n in ${K3_BENCH_TOKENS:-512 2048}; do
  # the disk, read the engine's two ways, on the model's files
  "$this" plan "$model" "${streamed[@]}" --seconds 2 > "$work/plan-$n.txt" 2>&1
  read -r seq_gbps expert_gbps < <(sed -n 's/.*machine: disk \([0-9.]*\) GB\/s sequential, \([0-9.]*\) GB\/s expert reads.*/\1 \2/p' "$work/plan-$n.txt")
  [ -n "${expert_gbps:-}" ] || { echo "  FAIL: no disk figures in plan's output:"; cat "$work/plan-$n.txt"; exit 1; }
  load_s=$(cut -d' ' -f1 /proc/loadavg)
  prefill "$n" "streamed-$n" "${streamed[@]}"
  load_r=$(cut -d' ' -f1 /proc/loadavg)
  prefill "$n" "resident-$n"
  python3 - "$work/report-streamed-$n.json" "$work/report-resident-$n.json" "$seq_gbps" "$expert_gbps" "$n" "$load_s" "$load_r" "$trunk_bytes" "$pool_bytes" <<'PY' || fail=1
import json, sys
s, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
seq, rnd, n, load_s, load_r = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7]
trunk_size, pool_size = int(sys.argv[8]) / 1e9, int(sys.argv[9]) / 1e9
prefill, compute = s['prefill_seconds'], r['prefill_seconds']
trunk, experts = s['trunk_bytes_read'] / 1e9, s['expert_bytes_read'] / 1e9
read = trunk / seq + experts / rnd
wait = s.get('trunk_wait_seconds', 0) + s.get('expert_wait_seconds', 0)
bound = max(read, compute)
ratio, share = prefill / bound, wait / prefill
print(f"  {n:5d} tokens: {s['memory_plan'].split('; prefill pass ')[1].split(';')[0] if '; prefill pass ' in s['memory_plan'] else ''}")
print(f"               streamed {prefill:7.2f} s (load {load_s}); reads {trunk:.2f} + {experts:.2f} GB at {seq:.2f} / {rnd:.2f} GB/s = {read:6.2f} s; "
      f"resident {compute:7.2f} s (load {load_r})")
print(f"               streamed / max(reads, compute) = {ratio:.2f}x (at most 1.15x: {'yes' if ratio <= 1.15 else 'no'}); "
      f"waiting on reads {wait:.2f} s = {100 * share:.1f}% of the prefill (at most 2%: {'yes' if share <= 0.02 else 'no'})")
st = s.get('forward_stage_seconds', {}); rt = r.get('forward_stage_seconds', {})
print(f"               read {trunk / trunk_size:.2f}x the trunk ({trunk_size:.2f} GB) and {experts / pool_size:.2f}x the expert pool "
      f"({pool_size:.2f} GB) (at most 1.1x each: {'yes' if trunk <= 1.1 * trunk_size and experts <= 1.1 * pool_size else 'no'})")
rows = [k for k, v in sorted(st.items(), key=lambda kv: -kv[1]) if v >= 0.03 * prefill]
print("               by stage, streamed/resident s: " + ", ".join(f"{k} {st[k]:.2f}/{rt.get(k, 0):.2f}" for k in rows))
if s['generated_ids'][:1] != r['generated_ids'][:1]:
    print(f"  FAIL: first ids differ: streamed {s['generated_ids'][:1]}, resident {r['generated_ids'][:1]}")
    sys.exit(1)
PY
done
echo "  load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $fail
