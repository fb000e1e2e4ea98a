#!/usr/bin/env bash
# Sets up this machine for running gpuwerk (scripts/setup.sh build run), builds gpuwerk
# (release), puts `gpuwerk` on the PATH, builds the instance image when it is missing, and runs
# `gpuwerk up` with the given options.
#
#   scripts/up.sh [OPTION VALUE]…     scripts/up.sh --help
#
# `gpuwerk` on the PATH: as root, a link /usr/local/bin/gpuwerk to build/release/src/app/gpuwerk
# (an existing file there that is not such a link is left alone); otherwise the line to add to
# your shell is printed.
# Environment: GPUWERK_JOBS, the build's parallel jobs (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# The options of `gpuwerk up`, from the tables of docs/configuration.md (generated from the
# declarations in the code and checked by a test), so that --help needs no build.
usage() {
  sed -n '2,6s/^# \{0,1\}//p' "$0"
  echo
  echo "Options (each also GPUWERK_<KEY> in the environment, or KEY in the TOML file of"
  echo "--config FILE; flags win over the environment, which wins over the file):"
  echo "  --config FILE"
  awk -F'|' '
    /^<!-- options (server|up) -->/ { on = 1; next }
    /^<!-- end options/ { on = 0 }
    on && $2 ~ /`--/ {
      flag = $2; def = $5; meaning = $6
      gsub(/`/, "", flag); gsub(/^ +| +$/, "", flag); gsub(/`/, "", def); gsub(/`/, "", meaning)
      gsub(/^ +| +$/, "", def); gsub(/^ +| +$/, "", meaning)
      printf "  %s%s\n", flag, (def == "" ? "" : "  (default: " def ")")
      wrap = "fold -s -w 94 | sed \"s/^/      /\""
      print meaning | wrap
      close(wrap)
    }' docs/configuration.md
  echo
  echo "See docs/configuration.md."
}
for arg in "$@"; do
  case $arg in
    -h | --help) usage; exit 0 ;;
  esac
done

bash scripts/setup.sh build run
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUWERK_TESTS=OFF \
  -DGPUWERK_BENCH=OFF >/dev/null
ninja -C build/release -j "${GPUWERK_JOBS:-$(nproc)}" gpuwerk
binary=$root/build/release/src/app/gpuwerk

# `gpuwerk` on the PATH, as the README's commands expect.
link=/usr/local/bin/gpuwerk
on_path=$(command -v gpuwerk 2>/dev/null || true)
if [[ -n $on_path && $(readlink -f "$on_path") == "$(readlink -f "$binary")" ]]; then
  :  # already there
elif [[ $(id -u) -eq 0 && ( ! -e $link || -L $link ) ]]; then
  ln -sfn "$binary" "$link"
  echo "up: $link -> $binary" >&2
else
  echo "up: to run \`gpuwerk\` as typed in the README, add it to your PATH:" >&2
  echo "  export PATH=\"$root/build/release/src/app:\$PATH\"" >&2
fi

# The instance image (Debian + openssh-server), built once; `gpuwerk up` refuses to start
# without it. An image of your own (--instance-image, GPUWERK_INSTANCE_IMAGE or instance_image
# in the config file) must exist on the engine already.
image=${GPUWERK_INSTANCE_IMAGE:-}
for ((i = 1; i <= $#; i++)); do
  case ${!i} in
    --instance-image) j=$((i + 1)); image=${!j:-} ;;
    --instance-image=*) image=${!i#--instance-image=} ;;
  esac
done
if [[ -z $image ]]; then
  bash scripts/instance-image/build.sh localhost/gpuwerk-instance:bookworm
fi
exec "$binary" up "$@"
