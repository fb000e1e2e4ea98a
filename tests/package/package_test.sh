#!/usr/bin/env bash
# The Debian package, installed and started (docs/deploy.md "The package"): packs a build tree's
# `gpuwerk` with its CPack configuration (cmake/GpuwerkPackage.cmake), installs the .deb with dpkg
# into a test root and starts its units there under systemd:
#   - the test root is a podman container whose root file system is an overlay of this machine's
#     own (`--rootfs /:O`: the shared libraries the package depends on are those the build used;
#     nothing written reaches this machine), with systemd as PID 1 and no network but loopback;
#   - installing makes the `gpuwerk` user and /etc/gpuwerk (0750 root:gpuwerk) and leaves every
#     unit disabled and stopped; `systemd-analyze verify` accepts the units;
#   - with /etc/gpuwerk/server.conf, gpuwerk-server comes up as user gpuwerk and answers /healthz;
#     a host and a relay are registered through the CLI, and with agent.conf and relay.conf
#     gpuwerk-agent syncs with the server (the host's last_seen_at) and gpuwerk-relay answers SSH
#     (ssh-keyscan) as user gpuwerk with the host key of its state directory, which a restart
#     keeps, and logs its relay CA probe certificate (ssh-keygen run from its sandbox);
#   - removing the package stops the units.
# A sanitizer build's binary runs with LeakSanitizer off (a drop-in): it needs ptrace, which the
# units' system call filter refuses.
#
#   tests/package/package_test.sh BUILD_DIR SOURCE_DIR      (root, podman, systemd; ctest label
#                                                           `package`)
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
export CONTAINERS_CONF=$src/config/containers.conf
start=$SECONDS
say() { echo "package_test: [$((SECONDS - start)) s] $*"; }
fail() { echo "package_test: FAILED: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || fail "needs root (dpkg in the test root, rootful podman)"
for tool in podman cpack dpkg-deb; do
  command -v "$tool" >/dev/null || fail "$tool is missing (scripts/setup.sh build run test)"
done
[[ -x /lib/systemd/systemd ]] || fail "systemd is missing (scripts/setup.sh test installs it)"
[[ -x $build/src/app/gpuwerk ]] || fail "$build/src/app/gpuwerk is not built"

work=$(mktemp -d /tmp/gpuwerk-package-test.XXXXXX)
name=gpuwerk-package-test-$$
cleanup() {
  podman rm -f -t 0 "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# 1. The package, from this build tree.
say "cpack"
cpack --config "$build/CPackConfig.cmake" -B "$work/pkg" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack"; }
debs=("$work"/pkg/gpuwerk_*.deb)
[[ -f ${debs[0]} ]] || fail "cpack made no gpuwerk_*.deb"
deb=${debs[0]}
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/gpuwerk ./usr/lib/systemd/system/gpuwerk-server.service \
  ./usr/lib/systemd/system/gpuwerk-agent.service ./usr/lib/systemd/system/gpuwerk-relay.service \
  ./usr/share/doc/gpuwerk/examples/server.conf ./usr/share/doc/gpuwerk/deploy.md; do
  grep -q " $f\$" <<<"$contents" || fail "the package lacks $f"
done
depends=$(dpkg-deb -f "$deb" Depends)
for d in adduser openssh-client libsqlite3-0 libpq5 libssh-4; do
  grep -q "\b$d\b" <<<"$depends" || fail "Depends lacks $d: $depends"
done
say "built $(basename "$deb") ($(du -m "$deb" | cut -f1) MiB)"

# 2. The test root: this machine's root under an overlay, systemd as PID 1, booted into a target
# of its own (not the machine's default one, which would start its services).
cat >"$work/package-test.target" <<'UNIT'
[Unit]
Description=gpuwerk package test root
Requires=sysinit.target
After=sysinit.target
UNIT
cp "$src/tests/package/in_root.sh" "$work/in_root.sh"
# /tmp, /var/tmp and /run are empty tmpfs: copying this machine's busy /tmp up races its writers.
podman run -d --name "$name" --network none --systemd=always \
  --tmpfs /tmp:rw,notmpcopyup --tmpfs /var/tmp:rw,notmpcopyup --tmpfs /run:rw,notmpcopyup \
  --tmpfs /run/lock:rw,notmpcopyup \
  -v "$work/package-test.target:/etc/systemd/system/package-test.target:ro" \
  -v "$work:/package-test:ro" \
  --rootfs /:O /lib/systemd/systemd --unit=package-test.target >/dev/null
for _ in $(seq 120); do
  state=$(podman exec "$name" systemctl is-system-running 2>/dev/null || true)
  [[ $state == running || $state == degraded ]] && break
  sleep 0.5
done
[[ $state == running || $state == degraded ]] || fail "systemd in the test root: '$state'"
say "test root up (systemd: $state)"

# 3. Install and start, inside (tests/package/in_root.sh).
if ! podman exec -e DEB="/package-test/pkg/$(basename "$deb")" "$name" \
  bash /package-test/in_root.sh; then
  echo "--- journal of the units" >&2
  podman exec "$name" journalctl --no-pager -n 80 -u 'gpuwerk-*' >&2 || true
  fail "in the test root"
fi
say "passed"
