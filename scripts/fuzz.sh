#!/usr/bin/env bash
# libFuzzer targets of tests/fuzz (ASan + UBSan, Debian's clang): build them, run one briefly
# (what the test suite does), or run all of them for a long time.
#
#   scripts/fuzz.sh build                  configure + build into $K3_FUZZ_BUILD (default build-fuzz)
#   scripts/fuzz.sh run TARGET SECONDS     one target, from its seed corpus, for SECONDS
#   scripts/fuzz.sh long SECONDS [JOBS]    every target for SECONDS each, JOBS at a time (default 1);
#                                          prints executions per target, keeps the grown corpus
#   scripts/fuzz.sh budget SECONDS [RUNS]  every target one at a time, each until RUNS executions
#                                          (default 10 million) or its share of what is left of
#                                          SECONDS; time a fast target does not use goes to the next
#
# Seeds live in tests/fuzz/corpus/TARGET (in the repository); what a run discovers goes to
# $K3_FUZZ_BUILD/corpus/TARGET and crashes to $K3_FUZZ_BUILD/artifacts/. Exit code 77 when
# clang or its libFuzzer runtime (libclang-rt-*-dev) is not installed, so ctest shows "skipped".
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
BUILD=${K3_FUZZ_BUILD:-build-fuzz}
TARGETS="fuzz_http_request fuzz_openai_request fuzz_chat fuzz_tokenizer fuzz_stop_matcher fuzz_config_json fuzz_safetensors"

have_clang() {
  command -v clang++ >/dev/null 2>&1 || return 1
  echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' > /tmp/k3fuzz-probe.$$.cpp
  clang++ -fsanitize=fuzzer /tmp/k3fuzz-probe.$$.cpp -o /tmp/k3fuzz-probe.$$ >/dev/null 2>&1
  local ok=$?
  rm -f /tmp/k3fuzz-probe.$$ /tmp/k3fuzz-probe.$$.cpp
  return $ok
}

build() {
  if ! have_clang; then
    echo "SKIPPED: clang++ with libFuzzer is not installed (apt-get install clang libclang-rt-14-dev)"
    exit 77
  fi
  # One build at a time (ctest may start several runs together).
  mkdir -p "$BUILD"
  exec 9>"$BUILD/.lock"
  flock 9
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_CXX_FLAGS="-O1 -g" -DK3_FUZZ=ON -DK3_BUILD_TESTS=OFF -DK3_BUILD_BENCH=OFF >"$BUILD/configure.log" 2>&1 ||
      { cat "$BUILD/configure.log"; exit 1; }
  fi
  cmake --build "$BUILD" -j"${K3_FUZZ_JOBS:-2}" --target fuzz_all >"$BUILD/build.log" 2>&1 ||
    { tail -60 "$BUILD/build.log"; exit 1; }
  flock -u 9
}

# run TARGET SECONDS [extra libFuzzer flags]: prints "TARGET: N executions in S s (of SECONDS), ...".
run() {
  local target=$1 seconds=$2
  shift 2
  mkdir -p "$BUILD/corpus/$target" "$BUILD/artifacts"
  local log="$BUILD/$target.log" started=$SECONDS
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=0 \
    "$BUILD/tests/fuzz/$target" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$BUILD/artifacts/$target-" "$@" "$BUILD/corpus/$target" "$SRC/tests/fuzz/corpus/$target" \
    >"$log" 2>&1 || { tail -40 "$log"; echo "$target: FAILED (input in $BUILD/artifacts/)"; return 1; }
  local execs
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  echo "$target: $execs executions in $((SECONDS - started)) s (of $seconds), corpus $(ls "$BUILD/corpus/$target" | wc -l) new + $(ls "$SRC/tests/fuzz/corpus/$target" | wc -l) seeds"
}

case "${1:-}" in
  build) build ;;
  run)
    [ $# -ge 3 ] || { echo "usage: $0 run TARGET SECONDS" >&2; exit 2; }
    build
    run "$2" "$3" "${@:4}"
    ;;
  long)
    [ $# -ge 2 ] || { echo "usage: $0 long SECONDS [JOBS]" >&2; exit 2; }
    build
    jobs=${3:-1}
    pids=()
    for t in $TARGETS; do
      while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
      run "$t" "$2" &
      pids+=($!)
    done
    status=0
    for p in "${pids[@]}"; do wait "$p" || status=1; done
    exit $status
    ;;
  budget)
    [ $# -ge 2 ] || { echo "usage: $0 budget SECONDS [RUNS]" >&2; exit 2; }
    build
    deadline=$(( $(date +%s) + $2 ))
    left=$(echo $TARGETS | wc -w)
    status=0
    for t in $TARGETS; do
      share=$(( (deadline - $(date +%s)) / left ))
      [ "$share" -ge 1 ] || share=1
      run "$t" "$share" -runs="${3:-10000000}" || status=1
      left=$(( left - 1 ))
    done
    exit $status
    ;;
  *) sed -n '2,15p' "$0"; exit 2 ;;
esac
