#!/usr/bin/env bash
# Benchmark (issue 12 finding 4): logins through the SSH relay during a pre-authentication flood.
# SOURCES loopback addresses (127.0.0.1 … : one /24, as in the finding) each hold PER_SOURCE TCP
# connections to the relay that never send a byte (a closed one is reopened a second later),
# while LOGINS stock `ssh … 'echo ok'` logins run one after another from 127.200.0.1 against a
# real sshd behind the relay. Prints how many logins succeeded (target: at least 19 of 20), their
# median and worst time, what the relay closed at accept, and how many log lines it wrote.
# With SPREAD=1 each source is a /24 of its own (127.1.0.1, 127.2.0.1, …), so no per-source
# count holds the flood: the eviction of silent connections and the penalties per source do.
# Each run measures a baseline first, in the same script: the relay without those two (plain
# MaxStartups, as before them), and prints the ratio of logins that succeeded.
#
# It runs RelayAdmissionTest.FloodOfSilentConnectionsFromFiftySourcesLeavesLoginsThrough from
# src/relay/relay_test.cc (the relay in process), built in BUILD_DIR.
#
# Usage: tests/bench/relay_preauth.sh [sources=50] [per_source=20] [logins=20] [spread=0]
#        (root: the test's sshd logs in as the caller; BUILD_DIR defaults to build/asan)
set -euo pipefail
cd "$(dirname "$0")/../.."
sources=${1:-50}
per_source=${2:-20}
logins=${3:-20}
spread=${4:-0}
build=${BUILD_DIR:-build/asan}

if [[ ! -f $build/build.ninja ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUWERK_SANITIZE=ON \
    -DGPUWERK_WERROR=ON -DGPUWERK_BENCH=OFF >/dev/null
fi
nice ninja -C "$build" -j2 relay_test >/dev/null

run() {  # $1: baseline (0/1); prints the relay's lines, sets $ok
  local out
  out=$(GPUWERK_PREAUTH_SOURCES=$sources GPUWERK_PREAUTH_PER_SOURCE=$per_source \
    GPUWERK_PREAUTH_LOGINS=$logins GPUWERK_PREAUTH_SPREAD=$spread GPUWERK_PREAUTH_BASELINE=$1 \
    "$build/src/relay/relay_test" \
    --gtest_filter='RelayAdmissionTest.FloodOfSilentConnectionsFromFiftySourcesLeavesLoginsThrough' \
    2>&1) || { echo "$out" | grep -vE '^[0-9]{4}-' | tail -30; exit 1; }
  echo "$out" | grep -E '^\[ info \] pre-auth flood' | sed 's/^\[ info \] //'
  ok=$(echo "$out" | sed -nE 's/.*: ([0-9]+) of ([0-9]+) logins succeeded.*/\1/p')
}
run 1
base=${ok:-0}
run 0
echo "logins succeeded: ${ok:-?} of $logins (baseline in the same run: $base of $logins;" \
  "ratio $(awk -v a="${ok:-0}" -v b="$base" 'BEGIN { if (b == 0) print "inf"; else printf "%.1f", a / b }'))"
