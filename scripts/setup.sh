#!/usr/bin/env bash
# Installs everything gpuwerk needs to build, run and test on Debian bookworm.
# Idempotent: when every package is already installed it returns in well under a second.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config ccache git clang-16 libclang-rt-16-dev
  clang-format clang-tidy
  # libraries (DESIGN.md: Dependencies)
  libboost1.74-dev libboost-system1.74-dev nlohmann-json3-dev libsqlite3-dev libpq-dev
  libssh-dev libsodium-dev libssl-dev libcurl4-openssl-dev libspdlog-dev libfmt-dev
  libcli11-dev libtomlplusplus-dev libjemalloc-dev libutfcpp-dev
  libarchive-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev openssh-client openssh-server python3-aiosmtpd
  putty-tools wrk jq curl ca-certificates procps iproute2 tmux rsync
  # the container engine and the instance image (shared/notes/container-engine.md)
  podman runc conmon containernetworking-plugins iptables debootstrap debian-archive-keyring
  util-linux tar
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
