#!/usr/bin/env bash
# Builds the development instance image (Debian bookworm + openssh-server + docker.io, started by
# files/gpuwerk-init) with debootstrap and imports it into the local container engine (podman).
# See README.md beside this file.
#
#   scripts/instance-image/build.sh [--mirror URL] [TAG]   (default localhost/gpuwerk-instance:bookworm)
#
# Idempotent: when the engine already has TAG at this script's content version (label
# io.gpuwerk.instance-image) it exits 0 at once. Concurrent runs serialise on a
# lock and the later one finds the image. Needs root (debootstrap, rootful podman) and network
# access to a Debian mirror: --mirror URL, else GPUWERK_DEBIAN_MIRROR, else the one apt uses on
# this machine (/etc/apt/sources.list.d/*.sources, then sources.list and sources.list.d/*.list);
# with none of them it fails and says so. CONTAINERS_CONF defaults to the project's
# config/containers.conf.
set -euo pipefail

usage() {
  sed -n '2,14s/^# \{0,1\}//p' "$0"
}

# The first Debian archive URI apt uses (not a -security suite, not a disabled entry), from the
# deb822 files first, then the one-line format; prints nothing when there is none.
debian_mirror() {
  local apt=${1:-/etc/apt} uri
  shopt -s nullglob
  local deb822=("$apt"/sources.list.d/*.sources) one_line=("$apt"/sources.list "$apt"/sources.list.d/*.list)
  shopt -u nullglob
  if ((${#deb822[@]})); then
    uri=$(awk '
      function flush() {
        if (!found && types ~ /(^|[ \t])deb([ \t]|$)/ && tolower(enabled) != "no" &&
            suites !~ /-security/ && uri ~ /^(https?|file):\/\//) { print uri; found = 1 }
        types = ""; uri = ""; suites = ""; enabled = ""
      }
      FNR == 1 { flush() }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      /^Types:/ { types = $0 }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { suites = $0 }
      /^Enabled:/ { enabled = $2 }
      END { flush() }' "${deb822[@]}")
  fi
  if [[ -z ${uri:-} ]]; then
    for f in "${one_line[@]}"; do
      [[ -f $f ]] || continue
      uri=$(awk '$1 == "deb" {
        for (i = 2; i < NF; i++) if ($i ~ /^(https?|file):\/\//) {
          if ($(i + 1) !~ /-security/) { print $i; exit }
          break
        } }' "$f")
      [[ -z $uri ]] || break
    done
  fi
  [[ -z ${uri:-} ]] || echo "$uri"
}

mirror=${GPUWERK_DEBIAN_MIRROR:-}
tag=localhost/gpuwerk-instance:bookworm
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --mirror) [[ $# -ge 2 ]] || { echo "instance-image: --mirror needs a URL" >&2; exit 2; }
      mirror=$2; shift 2 ;;
    --mirror=*) mirror=${1#--mirror=}; shift ;;
    -*) echo "instance-image: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) tag=$1; shift ;;
  esac
done

root=$(cd "$(dirname "$0")/../.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/config/containers.conf}

# The image's content version, in its label io.gpuwerk.instance-image: raise it whenever what this
# script puts in the image changes, so that an engine holding TAG from an older script builds it
# again instead of keeping it.
version=2
current() {
  podman image inspect --format '{{ index .Labels "io.gpuwerk.instance-image" }}' "$tag" \
    2>/dev/null || true
}

if [[ $(current) == "$version" ]]; then
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
if [[ $(current) == "$version" ]]; then
  echo "instance-image: $tag already present" >&2
  exit 0
fi

[[ -n $mirror ]] || mirror=$(debian_mirror /etc/apt)
if [[ -z $mirror ]]; then
  echo "instance-image: no Debian mirror: apt on this machine names none (looked in" \
    "/etc/apt/sources.list.d/*.sources, /etc/apt/sources.list, /etc/apt/sources.list.d/*.list);" \
    "pass --mirror URL or set GPUWERK_DEBIAN_MIRROR" >&2
  exit 1
fi

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

work=$(mktemp -d /var/tmp/gpuwerk-instance-image.XXXXXX)
trap 'rm -rf --one-file-system "$work"' EXIT
rootfs=$work/rootfs

t0=$(now)
echo "instance-image: debootstrap bookworm from $mirror" >&2
debootstrap --variant=minbase \
  --include=openssh-server,ca-certificates,sudo,iproute2,rsync,procps,docker.io \
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
# gpuwerk instance: the person logs in as root with the key the agent mounts read-only at
# /etc/ssh/gpuwerk (its own drop-in, 00-gpuwerk-keys.conf, names the file).
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
# The start script (sshd, and the inner Docker daemon when the host allows it), the docker client's
# wrapper that says why it cannot work where Docker inside is off, and the login line that says
# the mode (docs/docker-inside.md).
install -m 0755 "$root/scripts/instance-image/files/gpuwerk-init" "$rootfs/usr/local/sbin/gpuwerk-init"
install -m 0755 "$root/scripts/instance-image/files/docker" "$rootfs/usr/local/bin/docker"
install -m 0644 "$root/scripts/instance-image/files/docker-inside.sh" \
  "$rootfs/etc/profile.d/gpuwerk-docker-inside.sh"
# Debian's package enables the daemon for systemd, which does not run here: gpuwerk-init starts it.
rm -f "$rootfs/etc/docker/key.json"
# The engine sets the hostname; no machine identity baked into the image.
: >"$rootfs/etc/machine-id"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/var/log/*.log "$rootfs"/tmp/*
echo "instance-image: rootfs is $(du -sh --one-file-system "$rootfs" | cut -f1)" >&2

t1=$(now)
tar --numeric-owner --xattrs -C "$rootfs" -c . |
  podman import --quiet \
    --change 'CMD ["/usr/local/sbin/gpuwerk-init"]' \
    --change 'EXPOSE 22/tcp' \
    --change "LABEL io.gpuwerk.instance-image=$version" \
    --message "gpuwerk instance image: Debian bookworm + openssh-server + docker.io" \
    - "$tag" >/dev/null
echo "instance-image: import took $(elapsed "$t1") s; built $tag in $(elapsed "$t0") s" >&2
