# Sourced by the load, soak and fault scripts: start `k3serve serve` on a free loopback port in
# the background and stop it. Sets DAEMON_PID, DAEMON_PORT, DAEMON_LOG.
BIN=${K3SERVE_BIN:-build/k3serve}

start_daemon() {  # start_daemon MODEL_DIR [serve flags...]
  local model=$1
  shift
  DAEMON_LOG=$(mktemp /tmp/k3bench-daemon.XXXXXX.log)
  DAEMON_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$BIN" serve "$model" --host 127.0.0.1 --port "$DAEMON_PORT" "$@" 2>"$DAEMON_LOG" &
  DAEMON_PID=$!
  for _ in $(seq 1 600); do
    if curl -sf "http://127.0.0.1:$DAEMON_PORT/health" >/dev/null 2>&1; then return 0; fi
    kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$DAEMON_LOG"; echo "daemon exited" >&2; return 1; }
    sleep 0.5
  done
  echo "daemon not ready after 300 s" >&2
  return 1
}

stop_daemon() {
  if [ -n "${DAEMON_PID:-}" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
    kill -TERM "$DAEMON_PID"
    wait "$DAEMON_PID" || true
  fi
  DAEMON_PID=
}

demo_model() {  # demo_model [DIR]: the demo model, made when missing
  local model=${1:-${K3_DEMO_MODEL:-models/demo}}
  [ -f "$model/config.json" ] || "$BIN" make-model "$model" --preset demo >/dev/null
  echo "$model"
}
