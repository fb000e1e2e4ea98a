#!/usr/bin/env bash
# Builds the Debian package of gpuwerk (docs/deploy.md "The package"): sets up this machine for
# building (scripts/setup.sh build; its build-essential brings dpkg-shlibdeps), makes the release
# build (the tree scripts/up.sh uses: build/release, the dashboard embedded), packs it with CPack's
# DEB generator (cmake/GpuwerkPackage.cmake) into build/package and prints the .deb's path as the
# last line.
#
#   scripts/package.sh
#
# Environment: GPUWERK_JOBS, the build's parallel jobs (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

case ${1:-} in
  -h | --help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
  "") ;;
  *) echo "package: no arguments expected (see --help)" >&2; exit 2 ;;
esac

bash scripts/setup.sh build
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUWERK_TESTS=OFF \
  -DGPUWERK_BENCH=OFF >/dev/null
ninja -C build/release -j "${GPUWERK_JOBS:-$(nproc)}" gpuwerk
rm -f build/package/gpuwerk_*.deb
cpack --config build/release/CPackConfig.cmake -B build/package >&2
debs=("$root"/build/package/gpuwerk_*.deb)
[[ -f ${debs[0]} ]] || { echo "package: cpack made no .deb" >&2; exit 1; }
echo "${debs[0]}"
