#!/usr/bin/env bash
# Builds the Dockerfile for real and runs the image (docs/operations.md, "The container image"),
# with Debian's podman and no registry: the debian:12 / debian:12-slim base images are made
# locally with debootstrap and imported under those names, so the Dockerfile's FROM lines
# resolve without pulling. Then: start the image on the demo model, wait for its HEALTHCHECK to
# pass, send a completion, stop it with SIGTERM and check in its log that it drained and exited 0.
#
#   sudo bash scripts/container-test.sh          (as root; takes 15-30 minutes on 2 cores)
#
# Needs: root, network access to Debian's archive (debootstrap, and apt inside the build), a
# kernel and filesystem podman can run containers on (overlay or vfs storage). Not part of the
# default test suite because of its length. K3_CONTAINER_WORK (default /var/tmp/k3serve-container)
# keeps the base image's rootfs and the demo model between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${K3_CONTAINER_WORK:-/var/tmp/k3serve-container}
image=localhost/k3serve:test
name=k3serve-container-test
port=${K3_CONTAINER_PORT:-18080}
mkdir -p "$work"
log() { echo "container-test: $*"; }

need=()
for tool in podman debootstrap runc; do command -v "$tool" >/dev/null || need+=("$tool"); done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Inside sandboxes and CI runners (cgroup v1 or hybrid, a capped RLIMIT_NPROC) crun refuses
# to start containers ("cgroups in hybrid mode not supported", "setrlimit RLIMIT_NPROC:
# Operation not permitted"): runc with the cgroupfs manager and no default ulimits works there.
cat > "$work/containers.conf" <<'CONF'
[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
CONF
export CONTAINERS_CONF="$work/containers.conf"

# 1. The base images, from Debian's archive.
if ! podman image exists docker.io/library/debian:12; then
  if [ ! -x "$work/rootfs/bin/sh" ]; then
    log "debootstrap bookworm into $work/rootfs"
    rm -rf "$work/rootfs"
    debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log"
  fi
  log "importing the rootfs as debian:12"
  tar -C "$work/rootfs" -c . | podman import --change 'CMD ["bash"]' - docker.io/library/debian:12 >/dev/null
fi
# The runtime stage's base: the same rootfs under the slim name (checked on its own, so a
# store that kept debian:12 but lost the tag still gets it).
podman image exists docker.io/library/debian:12-slim \
  || podman tag docker.io/library/debian:12 docker.io/library/debian:12-slim

# 2. The image. Host networking: the build's apt-get reaches Debian's archive the way the host does.
log "podman build (the build stage compiles and runs the C++ tests)"
podman build --pull=never --network=host --format docker -t "$image" . >"$work/build.log" 2>&1 \
  || { tail -n 40 "$work/build.log"; log "FAIL: podman build (log: $work/build.log)"; exit 1; }

# 3. The demo model, made by the image itself.
mkdir -p "$work/models"
if [ ! -f "$work/models/demo/config.json" ]; then
  podman run --rm --network=host --user 0 -v "$work/models:/models" "$image" make-model /models/demo --preset demo >/dev/null
fi
chmod -R a+rX "$work/models"

# 4. Run it, as the Dockerfile's README line says (host network here: no port publishing needed).
podman rm -f "$name" >/dev/null 2>&1 || true
cleanup() { podman rm -f "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT
start_container() {
  podman run -d --name "$name" --network=host -e K3SERVE_PORT="$port" "$@" \
    -v "$work/models/demo:/models/k3:ro" "$image" >/dev/null
}
# As the Dockerfile's README line says, with memlock unlimited (the daemon pins its resident
# weights). A sandbox that may not set rlimits ("error setting rlimits ... operation not
# permitted") runs it without: the daemon then logs that it cannot pin and serves all the same.
if ! start_container --ulimit memlock=-1:-1 2>"$work/run.err"; then
  grep -q 'rlimit' "$work/run.err" || { cat "$work/run.err"; log "FAIL: podman run"; exit 1; }
  log "this sandbox refuses --ulimit (rlimit: operation not permitted); running without it"
  podman rm -f "$name" >/dev/null 2>&1 || true
  start_container
fi
log "waiting for the HEALTHCHECK to pass"
healthy=0
for _ in $(seq 1 300); do
  if podman healthcheck run "$name" >/dev/null 2>&1; then healthy=1; break; fi
  sleep 1
done
[ "$healthy" = 1 ] || { podman logs "$name" | tail -n 30; log "FAIL: never healthy"; exit 1; }
log "healthy; sending a completion"
reply=$(curl -sS "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "k3", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}')
echo "$reply" | grep -q '"finish_reason"' || { log "FAIL: no completion: $reply"; exit 1; }
log "completion: $(echo "$reply" | head -c 200)"

# 5. SIGTERM: podman stop sends the image's STOPSIGNAL and waits.
log "stopping with SIGTERM"
podman stop -t 60 "$name" >/dev/null
code=$(podman inspect "$name" --format '{{.State.ExitCode}}')
# The log is read once into a file: `podman logs | grep -q` fails under pipefail when grep
# stops reading early (podman then dies of SIGPIPE).
podman logs "$name" >"$work/run.log" 2>&1
grep -q 'shutting down' "$work/run.log" || { tail -n 20 "$work/run.log"; log "FAIL: no shutdown in the log"; exit 1; }
grep -q 'shut down cleanly' "$work/run.log" || { tail -n 20 "$work/run.log"; log "FAIL: did not drain cleanly"; exit 1; }
[ "$code" = 0 ] || { log "FAIL: exit code $code"; exit 1; }
log "ok: built, healthy, served a completion, drained on SIGTERM and exited 0"
