#!/usr/bin/env bash
# Benchmark (issue 5): the scheduler against the store directly (tests/bench/sched_bench.cc, a
# SQLite file in a temp dir, no engine, no HTTP). 1,000 busy hosts over 4 GPU types and N open
# queue entries (N = 1,000 and 10,000): the time of each drain decision (one slot freed, one entry
# launched and recorded) and of listing a deep person's entries with positions. Prints the
# median and p99 per call at both sizes and their ratio 10,000 / 1,000 (the growth).
#
# Usage: tests/bench/sched.sh [repetitions=1]   (builds build/bench-release; GPUWERK_BENCH_RT=1
#        runs it at a real-time priority, which needs root)
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-1}

cmake -S . -B build/bench-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUWERK_TESTS=ON \
  -DGPUWERK_BENCH=ON -DGPUWERK_AGENT=OFF >/dev/null
ninja -C build/bench-release sched_bench >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# On a shared machine other processes preempt the measurement (wall-clock p99 then measures the
# machine, not the scheduler): GPUWERK_BENCH_RT=1 runs it at a real-time priority (root).
prefix=()
[[ ${GPUWERK_BENCH_RT:-0} == 1 ]] && prefix=(chrt -f 10)
"${prefix[@]}" build/bench-release/tests/bench/sched_bench --benchmark_repetitions="$reps" \
  --benchmark_out="$out" --benchmark_out_format=json >&2

jq -r '
  def us: . * 10 | round / 10 | tostring + " us";
  [.benchmarks[] | select(.run_type == "iteration")
   | (.run_name | sub("/iterations:.*"; "")) as $run
   | {run: $run, group: ($run | sub("/entries:[0-9]+"; "") | sub("/[0-9]+$"; "")),
      n: ($run | capture("(entries:|/)(?<n>[0-9]+)") | .n | tonumber),
      p50: .p50_us, p99: .p99_us, max: .max_us, cp50: .cpu_p50_us, cp99: .cpu_p99_us}] as $runs
  | "| run | median | p99 | max | CPU median | CPU p99 |",
    "| --- | --- | --- | --- | --- | --- |",
    ($runs[] | "| `\(.run)` | \(.p50 | us) | \(.p99 | us) | \(.max | us) | \(.cp50 | us) | \(.cp99 | us) |"),
    "",
    ($runs | group_by(.group)[] | (map(select(.n == 1000))[0]) as $a
     | (map(select(.n == 10000))[0]) as $b | select($a != null and $b != null)
     | "growth 1,000 -> 10,000 entries, \($a.group): median x\($b.p50 / $a.p50 * 100 | round / 100), p99 x\($b.p99 / $a.p99 * 100 | round / 100), CPU median x\($b.cp50 / $a.cp50 * 100 | round / 100)")
' "$out"
