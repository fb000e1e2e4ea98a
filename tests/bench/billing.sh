#!/usr/bin/env bash
# Benchmark (issue 13): closing a month (billing::Invoices::CloseMonth, tests/bench/billing_bench.cc)
# against the store directly (a SQLite file in a temp dir, no HTTP): 1,000 billing accounts and
# 1,000, then 10,000 billing sessions. Prints the time per close and per session at both sizes
# (wall and the calling thread's CPU time) and the growth 1,000 -> 10,000 per session (1.0 =
# linear; below 1 better than linear).
#
# Usage: tests/bench/billing.sh [repetitions=1]   (builds build/bench-release)
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-1}

cmake -S . -B build/bench-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUWERK_TESTS=ON \
  -DGPUWERK_BENCH=ON -DGPUWERK_AGENT=OFF >/dev/null
ninja -C build/bench-release billing_bench >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
build/bench-release/tests/bench/billing_bench --benchmark_repetitions="$reps" \
  --benchmark_out="$out" --benchmark_out_format=json >&2

jq -r '
  [.benchmarks[] | select(.run_type == "iteration")
   | {n: (.run_name | capture("sessions:(?<n>[0-9]+)") | .n | tonumber),
      ms: .ms_per_close, us: .us_per_session, cpu: .cpu_time, lines: .lines}] as $runs
  | "| sessions | accounts | ms per close | us per session | CPU ms per close | CPU us per session | lines |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ($runs[] | "| \(.n) | 1000 | \(.ms * 10 | round / 10) | \(.us * 100 | round / 100) | \(.cpu * 10 | round / 10) | \(.cpu * 1000 / .n * 100 | round / 100) | \(.lines) |"),
    "",
    (($runs | map(select(.n == 1000))[0]) as $a | ($runs | map(select(.n == 10000))[0]) as $b
     | select($a != null and $b != null)
     | "growth 1,000 -> 10,000 sessions: per close x\($b.ms / $a.ms * 100 | round / 100), per session x\($b.us / $a.us * 100 | round / 100), CPU per session x\(($b.cpu / 10000) / ($a.cpu / 1000) * 100 | round / 100)")
' "$out"
