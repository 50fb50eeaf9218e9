#!/usr/bin/env bash
# Expert parallelism over loopback (docs/performance.md, "Expert parallelism"): k3-mini decoded by
# one process and by an mpirun job of 2 ranks on this machine, the same prompt and the same
# tokens (checked). Printed: per MoE layer, the bytes exchanged with rank 1 and the microseconds
# from sending a layer's rows to its last output back (and the part rank 0 waited after its own
# experts), from rank 0's run report (expert_exchange_*); per token, the median decode step of
# each and their difference, the overhead of splitting the experts over two processes here. The
# two runs alternate K3_BENCH_ROUNDS times (default 2), so that a change of the machine's load
# falls on both; the medians are over every round's steps, and the fastest step of each is
# printed too (the one least disturbed by other work on a shared machine). Then `k3serve netbench` over the same
# loopback at the model's widths: the exchange alone, no experts computed, for passes of 1 to 256
# tokens, and the line through it that plan --ranks takes (--net-latency-us, --net-gbit).
#
#   bash tests/bench/bench_expert_parallel.sh K3_MINI_DIR [THIS_K3SERVE]
#
# K3_MINI_DIR from `k3serve make-model DIR --preset k3-mini`. Everything resident (the shards'
# pages are shared through the page cache, so the two ranks hold one copy). On one machine both
# ranks share its cores: the one-process run gets K3_BENCH_THREADS threads (default 2), each rank
# half of them, so both use the same cores. K3_BENCH_GEN tokens are generated (default 24).
set -euo pipefail
model=${1:?usage: $0 K3_MINI_DIR [THIS_K3SERVE]}
this=${2:-$(dirname "$0")/../../build/k3serve}
work=${K3_BENCH_DIR:-/tmp/k3-bench-expert-parallel}
threads=${K3_BENCH_THREADS:-2}
gen=${K3_BENCH_GEN:-24}
rounds=${K3_BENCH_ROUNDS:-2}
half=$(( threads > 1 ? threads / 2 : 1 ))
mkdir -p "$work"
command -v mpirun >/dev/null || { echo "SKIPPED: mpirun is not installed (openmpi-bin)"; exit 77; }
mpirun_words=(mpirun --allow-run-as-root --oversubscribe --bind-to none --enable-recovery --mca btl self,tcp
              --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
ids=17,4001,233,977

echo "expert parallelism over loopback, $model ($(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg))"
loads_one=() loads_two=()
for round in $(seq 1 "$rounds"); do
  "$this" run "$model" --ids "$ids" --gen "$gen" --threads "$threads" --report "$work/one.$round.json" > "$work/one.txt" 2>&1
  loads_one+=("$(cut -d' ' -f1 /proc/loadavg)")
  "${mpirun_words[@]}" -n 1 "$this" run "$model" --ids "$ids" --gen "$gen" --threads "$half" --report "$work/two.$round.json" : \
    -n 1 "$this" rank "$model" --threads "$half" > "$work/two.txt" 2>&1
  loads_two+=("$(cut -d' ' -f1 /proc/loadavg)")
done
load_one=$(IFS=,; echo "${loads_one[*]}") load_two=$(IFS=,; echo "${loads_two[*]}")
python3 - "$work" "$rounds" "$load_one" "$load_two" "$threads" "$half" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
load_one, load_two, threads, half = sys.argv[3:7]
ones = [json.load(open(f"{work}/one.{r}.json")) for r in range(1, rounds + 1)]
twos = [json.load(open(f"{work}/two.{r}.json")) for r in range(1, rounds + 1)]
for one, two in zip(ones, twos):
    if one['generated_ids'] != two['generated_ids']:
        print('  FAIL: the two runs generated different ids', one['generated_ids'], two['generated_ids'])
        sys.exit(1)
n = sum(t['expert_exchanges'] for t in twos)
if n == 0:
    print('  FAIL: rank 0 exchanged nothing with rank 1:', twos[0]['memory_plan'])
    sys.exit(1)
steps = sum(len(t['steps']) for t in twos)
decode = lambda runs: [s['seconds'] for r in runs for s in r['steps'][1:]]
t1, t2 = statistics.median(decode(ones)), statistics.median(decode(twos))
layers = n / steps
total = lambda key: sum(t[key] for t in twos)
print(f"  {n} layer exchanges over {steps} steps ({layers:.1f} a token): "
      f"{total('expert_exchange_bytes') / n / 1e3:.1f} kB a layer (latent inputs and row tokens out, outputs back), "
      f"{1e6 * total('expert_exchange_seconds') / n:.0f} us from send to last output, "
      f"{1e6 * total('expert_exchange_wait_seconds') / n:.0f} us of it waited after rank 0's own experts")
print(f"  decode, median step over {rounds} rounds: one process {1e3 * t1:.1f} ms ({threads} threads, load {load_one}); "
      f"2 ranks {1e3 * t2:.1f} ms ({half} thread(s) each, load {load_two}); "
      f"overhead {1e3 * (t2 - t1):+.1f} ms a token ({100 * (t2 / t1 - 1):+.0f}%), "
      f"{1e6 * (t2 - t1) / layers:+.0f} us a layer")
# the fastest step of each: on a shared machine the least disturbed by the others' load
m1, m2 = min(decode(ones)), min(decode(twos))
print(f"  decode, fastest step: one process {1e3 * m1:.1f} ms; 2 ranks {1e3 * m2:.1f} ms; "
      f"difference {1e3 * (m2 - m1):+.1f} ms a token ({100 * (m2 / m1 - 1):+.0f}%), {1e6 * (m2 - m1) / layers:+.0f} us a layer")
PY
echo "  the exchange alone (k3serve netbench, 2 ranks over loopback, load $(cut -d' ' -f1 /proc/loadavg)):"
"${mpirun_words[@]}" -n 2 "$this" netbench "$model" --seconds "${K3_BENCH_NET_SECONDS:-1}" 2>&1 | sed 's/^/  /'
