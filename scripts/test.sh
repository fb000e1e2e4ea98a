#!/usr/bin/env bash
# Sets up this machine for building, running and testing (scripts/setup.sh build run test), then
# builds and runs every test:
#   1. a format check of the C++ sources (clang-format, .clang-format),
#   2. the unit, integration and end-to-end tests (GoogleTest via CTest) in an AddressSanitizer +
#      UndefinedBehaviorSanitizer build with warnings as errors; the build embeds the web
#      dashboard (npm ci + vite, docs/dashboard.md) and the e2e label includes its browser tests
#      (Debian's Chromium through playwright-core; screenshots in build/asan/test-artifacts/),
#   3. the libFuzzer targets (clang-16) for a short run each.
# Usage: scripts/test.sh [ctest args…]   (e.g. -R Accounts)
# Environment: GPUWERK_FUZZ_SECONDS (default 30 per target), GPUWERK_JOBS (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bash scripts/setup.sh build run test
jobs=${GPUWERK_JOBS:-$(nproc)}

echo "== format check"
mapfile -t sources < <(git ls-files '*.cc' '*.h')
clang-format --dry-run -Werror "${sources[@]}"

echo "== build (asan+ubsan, -Werror)"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUWERK_SANITIZE=ON \
  -DGPUWERK_WERROR=ON -DGPUWERK_BENCH=OFF >/dev/null
ninja -C build/asan -j "$jobs"

echo "== tests"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build/asan && ctest --output-on-failure --timeout 600 -j "$jobs" "$@")

if [[ $# -eq 0 ]]; then
  echo "== fuzz (clang-16 libFuzzer, ${GPUWERK_FUZZ_SECONDS:-30} s per target)"
  CC=clang-16 CXX=clang++-16 cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DGPUWERK_FUZZ=ON -DGPUWERK_TESTS=OFF -DGPUWERK_WEB=OFF >/dev/null
  ninja -C build/fuzz -j "$jobs" key_parser_fuzz request_json_fuzz
  for target in key_parser_fuzz request_json_fuzz; do
    work=$(mktemp -d)  # libFuzzer adds new inputs to the first folder: keep the seeds clean
    "build/fuzz/tests/fuzz/$target" -max_total_time="${GPUWERK_FUZZ_SECONDS:-30}" \
      -print_final_stats=1 "$work" "tests/fuzz/corpus/$target" >"$work.log" 2>&1 ||
      { cat "$work.log"; exit 1; }
    grep -E "stat::number_of_executed_units|Done" "$work.log" || true
    rm -rf "$work" "$work.log"
  done
  echo "fuzz: no crash, no sanitizer report"
fi
