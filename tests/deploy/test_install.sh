#!/usr/bin/env bash
# Install and package checks (docs/operations.md, "Install and package"), run by ctest from the
# build directory:
#  1. `cmake --install` into a staging directory (DESTDIR): the tree has the binary, the unit
#     naming this install's paths, the config and env file, the docs; `systemd-analyze verify`
#     accepts the installed unit.
#  2. `cpack` builds the .deb; `dpkg-deb` shows its files, conffiles, dependencies and scripts.
#  3. As root (CI): `dpkg -i` installs it, `k3serve --version` runs from /usr/bin, the k3serve
#     user exists, the unit is installed but not enabled; `dpkg -r` removes it again.
set -euo pipefail
build=${1:?usage: test_install.sh BUILD_DIR}
build=$(cd "$build" && pwd)
stage=$(mktemp -d "${K3_TEST_TMP:-/tmp}/k3-install.XXXXXX")
trap 'rm -rf "$stage"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# ---- 1. staging install ----
DESTDIR="$stage/root" cmake --install "$build" --prefix /usr/local >/dev/null
root="$stage/root/usr/local"
for f in bin/k3serve lib/systemd/system/k3serve.service etc/k3serve/k3serve.json etc/k3serve/k3serve.env \
         share/doc/k3serve/README.md share/doc/k3serve/docs/operations.md share/doc/k3serve/examples/k3serve.example.json; do
  [ -e "$root/$f" ] || fail "missing $f in the staged install"
done
[ -x "$root/bin/k3serve" ] || fail "bin/k3serve is not executable"
"$root/bin/k3serve" --version | grep -q '^k3serve ' || fail "the installed binary does not run"
unit="$root/lib/systemd/system/k3serve.service"
grep -q '^ExecStart=/usr/local/bin/k3serve serve --config /usr/local/etc/k3serve/k3serve.json$' "$unit" \
  || fail "the installed unit does not name the installed paths: $(grep ExecStart "$unit")"
grep -q '^EnvironmentFile=-/usr/local/etc/k3serve/k3serve.env$' "$unit" || fail "EnvironmentFile path"
[ "$(stat -c %a "$root/etc/k3serve/k3serve.env")" = 640 ] || fail "k3serve.env must not be world-readable"
# An operator's edited config survives a second install.
echo '{"model": "/srv/models/mine"}' > "$root/etc/k3serve/k3serve.json"
DESTDIR="$stage/root" cmake --install "$build" --prefix /usr/local >/dev/null
grep -q mine "$root/etc/k3serve/k3serve.json" || fail "a reinstall overwrote the edited config"
echo "ok: staged install tree"

if command -v systemd-analyze >/dev/null; then
  # verify resolves ExecStart, so point it at the staged binary; the rest is checked as installed.
  sed "s#^ExecStart=/usr/local/bin/k3serve#ExecStart=$root/bin/k3serve#" "$unit" > "$stage/k3serve.service"
  out=$(systemd-analyze verify "$stage/k3serve.service" 2>&1 | grep -v -e 'Failed to open /dev/' -e 'system.slice' || true)
  if [ -n "$out" ]; then echo "$out" >&2; fail "systemd-analyze verify complained"; fi
  echo "ok: systemd-analyze verify"
else
  echo "SKIP: systemd-analyze is not installed"
fi

# ---- 2. the .deb ----
(cd "$build" && cpack -G DEB -B "$stage/deb" >/dev/null 2>&1) || fail "cpack failed"
deb=$(ls "$stage"/deb/k3serve_*.deb 2>/dev/null | head -n1)
[ -n "$deb" ] || fail "cpack made no .deb"
info=$(dpkg-deb --info "$deb")
echo "$info" | grep -q '^ Package: k3serve$' || fail "package name"
echo "$info" | grep -q '^ Depends:.*libc6' || fail "no shared-library dependencies declared: $info"
echo "$info" | grep -q '^ Depends:.*adduser' || fail "adduser dependency"
for lib in libcurl4 libgomp1 libsystemd0; do
  echo "$info" | grep -q "^ Depends:.*$lib" || fail "missing dependency $lib"
done
# The HTTP server is the daemon's own (server/http/); cpp-httplib is the tests' client only.
! echo "$info" | grep -q '^ Depends:.*libcpp-httplib' || fail "the daemon should not depend on cpp-httplib"
contents=$(dpkg-deb --contents "$deb")
for f in ./usr/bin/k3serve ./usr/lib/systemd/system/k3serve.service ./etc/k3serve/k3serve.json \
         ./etc/k3serve/k3serve.env ./usr/share/doc/k3serve/README.md; do
  echo "$contents" | grep -q " $f\$" || fail "the .deb lacks $f"
done
ctl="$stage/ctl"
dpkg-deb --control "$deb" "$ctl"
grep -qx /etc/k3serve/k3serve.json "$ctl/conffiles" || fail "config is not a conffile"
grep -q 'adduser --system' "$ctl/postinst" || fail "postinst does not create the user"
! grep -q 'systemctl.*\(enable\|start\)' "$ctl/postinst" || fail "postinst must not enable or start the unit"
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/lib/systemd/system/k3serve.service \
  | grep -q '^ExecStart=/usr/bin/k3serve serve --config /etc/k3serve/k3serve.json$' || fail "the packaged unit's paths"
echo "ok: $(basename "$deb") ($(du -h "$deb" | cut -f1))"

# ---- 3. dpkg -i on this machine (root only: CI runs as root) ----
if [ "$(id -u)" != 0 ] || ! command -v dpkg >/dev/null; then
  echo "SKIP: dpkg -i needs root"
  exit 0
fi
if dpkg-query -W -f='${Status}' k3serve 2>/dev/null | grep -q 'install ok installed'; then
  echo "SKIP: a k3serve package is already installed on this machine; not touching it"
  exit 0
fi
trap 'dpkg -P k3serve >/dev/null 2>&1 || true; rm -rf "$stage"' EXIT
DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" >/dev/null || fail "dpkg -i failed"
/usr/bin/k3serve --version | grep -q "^k3serve " || fail "the installed k3serve does not run"
getent passwd k3serve >/dev/null || fail "no k3serve user after install"
[ -f /usr/lib/systemd/system/k3serve.service ] || fail "unit not installed"
if [ -d /run/systemd/system ]; then
  [ "$(systemctl is-enabled k3serve 2>/dev/null || true)" != enabled ] || fail "the unit was enabled"
  [ "$(systemctl is-active k3serve 2>/dev/null || true)" != active ] || fail "the unit was started"
fi
dpkg -P k3serve >/dev/null || fail "dpkg -P failed"
[ ! -e /usr/bin/k3serve ] || fail "/usr/bin/k3serve left after purge"
echo "ok: dpkg -i, k3serve --version, dpkg -P"
