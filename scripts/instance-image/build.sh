#!/usr/bin/env bash
# Builds the development instance image (Debian bookworm + openssh-server) with debootstrap and
# imports it into the local container engine (podman). See README.md beside this file.
#
#   scripts/instance-image/build.sh [TAG]     (default localhost/gpuwerk-instance:bookworm)
#
# Idempotent: when the engine already has TAG it exits 0 at once. Concurrent runs serialise on a
# lock and the later one finds the image. Needs root (debootstrap, rootful podman) and network
# access to the Debian mirror that apt uses on this machine.
# Environment: GPUWERK_DEBIAN_MIRROR overrides the mirror; CONTAINERS_CONF defaults to the
# project's config/containers.conf.
set -euo pipefail

tag=${1:-localhost/gpuwerk-instance:bookworm}
root=$(cd "$(dirname "$0")/../.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/config/containers.conf}

if podman image exists "$tag"; then
  echo "instance-image: $tag already present" >&2
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "instance-image: must run as root (debootstrap and rootful podman)" >&2
  exit 1
fi

# One build at a time on this machine; whoever waited finds the image built.
exec 9>"${TMPDIR:-/tmp}/gpuwerk-instance-image.lock"
flock 9
if podman image exists "$tag"; then
  echo "instance-image: $tag already present" >&2
  exit 0
fi

# The Debian mirror apt uses here: deb822 sources first, then the one-line format.
mirror=${GPUWERK_DEBIAN_MIRROR:-}
if [[ -z $mirror && -f /etc/apt/sources.list.d/debian.sources ]]; then
  mirror=$(awk '/^URIs:/ && $2 !~ /security/ { print $2; exit }' \
    /etc/apt/sources.list.d/debian.sources)
fi
if [[ -z $mirror && -f /etc/apt/sources.list ]]; then
  mirror=$(awk '$1 == "deb" && $0 !~ /security/ {
    for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list)
fi
mirror=${mirror:-http://deb.debian.org/debian}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

work=$(mktemp -d /var/tmp/gpuwerk-instance-image.XXXXXX)
trap 'rm -rf --one-file-system "$work"' EXIT
rootfs=$work/rootfs

t0=$(now)
echo "instance-image: debootstrap bookworm from $mirror" >&2
debootstrap --variant=minbase \
  --include=openssh-server,ca-certificates,sudo,iproute2,rsync,procps \
  bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 40 "$work/debootstrap.log" >&2
  echo "instance-image: debootstrap failed (log above)" >&2
  exit 1
}
echo "instance-image: debootstrap took $(elapsed "$t0") s" >&2

# Each container generates its own host keys at start (the image's CMD).
rm -f "$rootfs"/etc/ssh/ssh_host_*
# Key-only root login. The drop-in is read before the rest of sshd_config, so it wins.
mkdir -p "$rootfs/etc/ssh/sshd_config.d"
cat >"$rootfs/etc/ssh/sshd_config.d/gpuwerk.conf" <<'CONF'
# gpuwerk instance: the person logs in as root with the key written to /root/.ssh at create.
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
# Every relay session is one connection from the relay: allow many logins at once.
MaxStartups 100:30:200
CONF
# pam_loginuid cannot write /proc/self/loginuid in a container; do not fail the session on it.
if [[ -f $rootfs/etc/pam.d/sshd ]]; then
  sed -i 's/^session\s\+required\s\+pam_loginuid.so/session optional pam_loginuid.so/' \
    "$rootfs/etc/pam.d/sshd"
fi
# The engine sets the hostname; no machine identity baked into the image.
: >"$rootfs/etc/machine-id"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/var/log/*.log "$rootfs"/tmp/*
echo "instance-image: rootfs is $(du -sh --one-file-system "$rootfs" | cut -f1)" >&2

t1=$(now)
tar --numeric-owner --xattrs -C "$rootfs" -c . |
  podman import --quiet \
    --change 'CMD ["/bin/sh","-c","ssh-keygen -A && mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e"]' \
    --change 'EXPOSE 22/tcp' \
    --message "gpuwerk instance image: Debian bookworm + openssh-server" \
    - "$tag" >/dev/null
echo "instance-image: import took $(elapsed "$t1") s; built $tag in $(elapsed "$t0") s" >&2
