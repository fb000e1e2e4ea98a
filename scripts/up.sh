#!/usr/bin/env bash
# Sets up this machine, builds gpuwerk (release) and runs `gpuwerk up` with the given flags.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUWERK_TESTS=OFF \
  -DGPUWERK_BENCH=OFF >/dev/null
ninja -C build/release gpuwerk
exec build/release/src/app/gpuwerk up "$@"
