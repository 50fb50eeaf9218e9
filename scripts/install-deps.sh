#!/usr/bin/env bash
# Installs everything k3serve needs to build, run and test on Debian 12, as root. Idempotent:
# packages already present are left alone. Only Debian's archive and the npm registry are used.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ca-certificates curl
  libcpp-httplib-dev nlohmann-json3-dev libspdlog-dev doctest-dev
  libpcre2-dev libsystemd-dev libbenchmark-dev libcurl4-openssl-dev libssl-dev
  python3 python3-numpy
  libpng-dev libjpeg62-turbo-dev python3-pil   # image input (engine/vision); Pillow is the tests' oracle
  haproxy
  libopenmpi-dev openmpi-bin   # expert parallelism over several machines (engine/parallel, mpirun)
  # The web UI's Markdown, sanitiser, code highlighter and math, embedded into the binary at build time.
  libjs-marked node-dompurify libjs-highlight.js libjs-katex fonts-katex
  clang libclang-rt-14-dev   # libFuzzer targets (scripts/fuzz.sh), run briefly by the suite
)
# The web UI and OpenAI-client tests need Node.js (>= 18) and a browser.
if [ "${K3_WITH_NODE:-1}" = 1 ]; then
  command -v node >/dev/null 2>&1 || packages+=(nodejs npm)
  packages+=(chromium)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install-deps: all packages present"
