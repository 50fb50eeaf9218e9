#!/usr/bin/env bash
# Builds k3serve, writes the built-in demo model (if not there yet) and starts the daemon on it
# at http://127.0.0.1:8080 (Ctrl-C stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
model=${K3_DEMO_MODEL:-models/demo}
if [ ! -f "$model/config.json" ]; then
  ./build/k3serve make-model "$model" --preset demo
fi
./build/k3serve verify "$model"
./build/k3serve inspect "$model"
exec ./build/k3serve serve "$model" "$@"
