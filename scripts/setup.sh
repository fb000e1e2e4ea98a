#!/usr/bin/env bash
# Installs the Debian bookworm packages gpuwerk needs, by purpose:
#
#   scripts/setup.sh [build] [run] [test]     (no group: all three)
#
#   build  the compiler, CMake and the libraries gpuwerk compiles against, and Node.js + npm,
#          which build the web dashboard that the binary embeds (docs/dashboard.md "Build")
#   run    what `gpuwerk up` and its agent use at run time: the container engine (podman) and
#          what scripts/instance-image/build.sh needs (debootstrap), ssh for `gpuwerk ssh`
#   test   what scripts/test.sh adds: GoogleTest, sshd, an SMTP sink, a PostgreSQL server (the
#          store's tests start one of their own, tests/support/postgres_server.h), clang for the
#          fuzzers and the format check, the tools the integration tests and benchmarks call,
#          Chromium for the dashboard's browser tests, and systemd for the package's test
#
# scripts/up.sh installs `build run`, scripts/test.sh `build run test`. Idempotent: when every
# package is already installed it returns in well under a second.
set -euo pipefail

build=(
  build-essential cmake ninja-build pkg-config ccache git
  # libraries (DESIGN.md: Dependencies)
  libboost1.74-dev libboost-system1.74-dev nlohmann-json3-dev libsqlite3-dev libpq-dev
  libssh-dev libsodium-dev libssl-dev libcurl4-openssl-dev libspdlog-dev libfmt-dev
  libcli11-dev libtomlplusplus-dev libjemalloc-dev libutfcpp-dev
  libarchive-dev
  prometheus-cpp-dev  # /metrics: only its core library is linked (registry, text serializer)
  nodejs npm  # the dashboard's build (web/); skipped below when a Node.js >= 18.19 with npm is there
)
run=(
  # the container engine and the instance image (shared/notes/container-engine.md)
  podman runc conmon containernetworking-plugins iptables debootstrap debian-archive-keyring
  util-linux tar ca-certificates curl procps
  # `gpuwerk ssh`
  openssh-client
)
test=(
  clang-16 libclang-rt-16-dev clang-format clang-tidy
  libgtest-dev libgmock-dev libbenchmark-dev openssh-server python3-aiosmtpd
  putty-tools wrk jq iproute2 tmux rsync
  python3-paramiko  # relay_test: an SSH client that sends a user name with a NUL byte
  postgresql  # the PostgreSQL store's tests: initdb and postgres (never started as a service here)
  chromium fonts-dejavu-core  # the dashboard's browser tests (playwright-core drives it headless)
  systemd  # the package test (tests/package): PID 1 of its test root, systemd-analyze verify
)

(($#)) || set -- build run test
packages=()
for group in "$@"; do
  case $group in
    build) packages+=("${build[@]}") ;;
    run) packages+=("${run[@]}") ;;
    test) packages+=("${test[@]}") ;;
    *) echo "usage: $0 [build] [run] [test]" >&2; exit 2 ;;
  esac
done

# A Node.js that is already there (e.g. a newer one from another apt source, whose nodejs
# package bundles npm and conflicts with Debian's) is kept when it is new enough for the build.
if command -v node >/dev/null && command -v npm >/dev/null &&
  node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 18 || (a === 18 && b >= 19) ? 0 : 1)' 2>/dev/null; then
  kept=()
  for p in "${packages[@]}"; do
    [[ $p == nodejs || $p == npm ]] || kept+=("$p")
  done
  packages=("${kept[@]}")
fi

# One dpkg-query for all: the packages installed, then the ones asked for that are not.
declare -A installed=()
while read -r name status; do
  [[ $status == 'install ok installed' ]] && installed[${name%%:*}]=1
done < <(dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2>/dev/null || true)
missing=()
for p in "${packages[@]}"; do
  [[ -n ${installed[$p]:-} ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
