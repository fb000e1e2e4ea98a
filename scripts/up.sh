#!/usr/bin/env bash
# Sets up this machine, builds gpuwerk (release) and runs `gpuwerk up` with the given flags.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUWERK_TESTS=OFF \
  -DGPUWERK_BENCH=OFF >/dev/null
ninja -C build/release gpuwerk
# The instance image (Debian + openssh-server), built once; `gpuwerk up` refuses to start
# without it. An image of your own (GPUWERK_INSTANCE_IMAGE or instance_image in the config
# file) must exist on the engine already.
if [[ -z ${GPUWERK_INSTANCE_IMAGE:-} ]]; then
  bash scripts/instance-image/build.sh localhost/gpuwerk-instance:bookworm
fi
exec build/release/src/app/gpuwerk up "$@"
