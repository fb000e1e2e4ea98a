#!/usr/bin/env bash
# Benchmark (issue 2): authenticated, store-backed `GET /api/v1/ssh-keys` (10 keys) against
# `GET /healthz` on one server, same wrk settings, back to back. Prints both rates and the ratio,
# and the server's CPU time per request of each (steadier than req/s on a shared machine).
# Usage: tests/bench/http_keys.sh [duration_seconds=10] [connections=16] [threads=2]
# GPUWERK_BENCH_BINARY=path/to/gpuwerk runs that binary instead of building build/release (to
# compare two builds back to back).
set -euo pipefail
cd "$(dirname "$0")/../.."
duration=${1:-10}
connections=${2:-16}
threads=${3:-2}

binary=${GPUWERK_BENCH_BINARY:-}
if [[ -z $binary ]]; then
  bash scripts/setup.sh
  cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUWERK_TESTS=OFF \
    -DGPUWERK_BENCH=OFF >/dev/null
  ninja -C build/release gpuwerk >/dev/null
  binary=build/release/src/app/gpuwerk
fi

work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
url=http://127.0.0.1:$port
"$binary" server --data "$work/data" --listen "127.0.0.1:$port" \
  --log-level warn >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do curl -sf "$url/healthz" >/dev/null && break; sleep 0.1; done

jar="$work/cookies"
curl -sf -H 'Content-Type: application/json' \
  -d '{"email":"bench@example.test","password":"bench password 1"}' "$url/api/v1/auth/signup" >/dev/null
# The address is proven with the mailed link (the server's Maildir outbox), which signs in.
proof=""
for _ in $(seq 100); do
  proof=$(python3 -c '
import email, pathlib, re, sys
for p in pathlib.Path(sys.argv[1]).rglob("*"):
    for part in email.message_from_bytes(p.read_bytes()).walk() if p.is_file() else []:
        if part.get_content_type() == "text/plain":
            m = re.search(r"/auth/prove-address\?token=([\w-]+)", part.get_payload(decode=True).decode())
            if m: print(m.group(1)); sys.exit()
' "$work/data/mail" 2>/dev/null) && [[ -n $proof ]] && break
  sleep 0.1
done
jq -n --arg t "$proof" '{token:$t, password:"bench password 1"}' |
  curl -sf -c "$jar" -H 'Content-Type: application/json' -d @- \
    "$url/api/v1/auth/prove-address/consume" >/dev/null
for i in $(seq 10); do
  ssh-keygen -q -N '' -t ed25519 -C "bench$i" -f "$work/key$i" </dev/null
  jq -n --arg n "key$i" --rawfile k "$work/key$i.pub" '{name:$n, public_key:$k}' |
    curl -sf -b "$jar" -H 'Content-Type: application/json' -d @- "$url/api/v1/ssh-keys" >/dev/null
done
token=$(curl -sf -b "$jar" -H 'Content-Type: application/json' -d '{"name":"bench"}' \
  "$url/api/v1/tokens" | jq -r .token)
[[ $(curl -sf -H "Authorization: Bearer $token" "$url/api/v1/ssh-keys" | jq .total) == 10 ]]

rate() {  # wrk's Requests/sec for a path, extra args passed on
  local path=$1; shift
  wrk -t "$threads" -c "$connections" -d "${duration}s" "$@" "$url$path" | awk '/Requests\/sec/ {print $2}'
}
# The server's CPU time (user + system, clock ticks) around each run: CPU per request moves much
# less than req/s when other work shares the cores.
cpu() { awk '{print $14 + $15}' "/proc/$server/stat"; }
c0=$(cpu)
healthz=$(rate /healthz)
c1=$(cpu)
keys=$(rate /api/v1/ssh-keys -H "Authorization: Bearer $token")
c2=$(cpu)
ratio=$(awk -v a="$keys" -v b="$healthz" 'BEGIN {printf "%.2f", a / b}')
per_request() {  # microseconds of server CPU per request: ticks, req/s
  awk -v c="$1" -v r="$2" -v d="$duration" -v t="$(getconf CLK_TCK)" \
    'BEGIN {printf "%.1f", c / t / (r * d) * 1e6}'
}
cpu_healthz=$(per_request $((c1 - c0)) "$healthz")
cpu_keys=$(per_request $((c2 - c1)) "$keys")
echo "wrk -t$threads -c$connections -d${duration}s, server --http-threads 4 (default), $(nproc) cores"
printf 'GET /healthz                      %10.0f req/s  %6s us server CPU/request\n' "$healthz" \
  "$cpu_healthz"
printf 'GET /api/v1/ssh-keys (10, token)  %10.0f req/s  %6s us server CPU/request\n' "$keys" \
  "$cpu_keys"
echo "ratio keys/healthz: $ratio (target >= 0.50); server CPU ratio (healthz/keys):" \
  "$(awk -v a="$cpu_healthz" -v b="$cpu_keys" 'BEGIN {printf "%.2f", a / b}')"
