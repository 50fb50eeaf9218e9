#!/usr/bin/env bash
# Cross-builds k3serve for another architecture on this Debian 12 x86-64 host, runs a subset of
# its test binaries under qemu-user-static, and packages the .deb (docs/development.md, "Other
# architectures"). Only aarch64 for now:
#
#   sudo bash scripts/cross-test.sh aarch64      (as root: it installs packages)
#
# 1. installs Debian's cross compiler, qemu-user-static and the arm64 -dev packages the build
#    links (multiarch, from Debian's archive, next to the host's: `dpkg --add-architecture arm64`);
# 2. configures build-aarch64/ with cmake/aarch64-linux-gnu.cmake (warnings are errors, no
#    benchmarks) and builds k3serve and the test binaries below;
# 3. runs, under emulation with K3_KERNELS=neon (so every engine a test loads uses the NEON set,
#    or the test fails): the kernel suite (each NEON kernel against the scalar reference bit for
#    bit, at every shape it tests), the golden gates on the NEON set (prefill logits, greedy and
#    incremental decode against the numpy reference's fixtures, tiny and tiny-wide), the trunk
#    codec cases (its NEON decoder) and the weights suite (checkpoint and safetensors parsing);
# 4. cpack: build-aarch64/k3serve_<version>_arm64.deb, checked to hold an aarch64 binary.
#
# Emulation is slow (10-50x): it measures correctness only, never speed. K3_CROSS_TESTS (a ctest
# -R regex) replaces the default test selection; K3_CROSS_JOBS sets build and ctest parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."

arch=${1:-}
case "$arch" in
  aarch64) deb_arch=arm64 triplet=aarch64-linux-gnu emulator=qemu-aarch64-static kernels=neon ;;
  *) echo "usage: $0 aarch64" >&2; exit 2 ;;
esac
build=build-$arch
jobs=${K3_CROSS_JOBS:-2}
log() { echo "cross-test: $*"; }

# ---- 1. packages ----
# Host tools, then the target's libraries. The -dev packages here are Multi-Arch: same, so they
# install beside the host's copies (apt upgrades a host library to the same version when the
# arm64 one is newer). nlohmann-json3-dev and doctest-dev are architecture-independent headers:
# scripts/install-deps.sh installs them for the host build and the cross build uses those.
host_packages=(cmake pkg-config g++-"$triplet" qemu-user-static nlohmann-json3-dev doctest-dev dpkg-dev file)
target_packages=(libspdlog-dev libcpp-httplib-dev libpcre2-dev liburing-dev libsystemd-dev
                 libcurl4-openssl-dev libssl-dev libgomp1 libstdc++6)
missing=()
for p in "${host_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
for p in "${target_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p:$deb_arch" 2>/dev/null | grep -q "install ok installed" || missing+=("$p:$deb_arch")
done
if [ ${#missing[@]} -gt 0 ]; then
  if ! dpkg --print-foreign-architectures | grep -qx "$deb_arch"; then
    log "adding the $deb_arch architecture to dpkg"
    dpkg --add-architecture "$deb_arch"
  fi
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ---- 2. configure and build ----
start=$(date +%s)
cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/$triplet.cmake" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DK3_WERROR=ON -DK3_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target k3serve tests_kernels tests_model tests_store tests_weights
log "built in $(( $(date +%s) - start )) s"

# ---- 3. tests under emulation ----
# The fuzz, node, deploy and reference entries need host tools or the daemon's full
# environment (cgroups, systemd, browsers); they run in the host suite, not here.
# Emulated, a golden gate takes minutes: the scalar-kernel gates and the rest of the model and
# store suites (sessions, batching, streaming) are left to the host suite, which runs the same
# code paths; what is architecture-specific is the kernels, the codec and the parsing.
selection=${K3_CROSS_TESTS:-'^kernels: |^weights: |^model: golden gates: .*selected kernels|^store: (near-Gaussian|random bytes|escapes inside|a damaged)'}
start=$(date +%s)
(cd "$build" && K3_KERNELS=$kernels ctest -R "$selection" -j"$jobs" --output-on-failure --timeout 1800)
# The kernel suite must have exercised the NEON set, not skipped it.
# (Output captured first: grep -q stopping early would fail the pipe under pipefail.)
neon_case=$(cd "$build" && K3_KERNELS=$kernels ctest -R '^kernels: the neon set is available' --output-on-failure || true)
grep -q '100% tests passed, 0 tests failed out of 1' <<<"$neon_case" ||
  { echo "cross-test: the neon set did not run" >&2; exit 1; }
log "tests under $emulator in $(( $(date +%s) - start )) s"

# ---- 4. the package ----
rm -f "$build"/k3serve_*_"$deb_arch".deb
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls "$build"/k3serve_*_"$deb_arch".deb)
[ "$(dpkg-deb -f "$deb" Architecture)" = "$deb_arch" ] || { echo "cross-test: $deb is not $deb_arch" >&2; exit 1; }
unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT
dpkg-deb -x "$deb" "$unpacked"
file -b "$unpacked/usr/bin/k3serve" | grep -q 'ARM aarch64' ||
  { echo "cross-test: $deb's k3serve is not an aarch64 binary" >&2; exit 1; }
"$emulator" "$unpacked/usr/bin/k3serve" --version >/dev/null
log "package: $deb (depends: $(dpkg-deb -f "$deb" Depends))"
