#!/usr/bin/env bash
# Benchmark (issue 3): launch latency. For each of N rounds, the time from `POST /api/v1/instances`
# to the instance's sshd accepting a connection (its SSH banner on the published port), and to
# the API saying `running` (the agent has proven a login with the person's key, case C05);
# against `podman run` of the same image to its sshd accepting, on the same engine, in the same
# script. Then restarts: from `POST …/restart` to the API saying `running` again and the sshd
# accepting. Prints the medians and the ratios.
#
# Usage: tests/bench/launch.sh [rounds=10]        (root; builds build/release)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-10}
root=$PWD

bash scripts/setup.sh >/dev/null
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUWERK_TESTS=OFF \
  -DGPUWERK_BENCH=OFF >/dev/null
ninja -C build/release gpuwerk >/dev/null
gpuwerk=$root/build/release/src/app/gpuwerk
image=localhost/gpuwerk-instance:bookworm
bash scripts/instance-image/build.sh "$image" >/dev/null

export CONTAINERS_CONF=$root/config/containers.conf
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
url=http://127.0.0.1:$port
pids=()
cleanup() {
  local rc=$?
  if ((rc != 0)); then
    echo "launch.sh failed ($rc); server and agent logs:" >&2
    tail -20 "$work/server.log" "$work/agent.log" >&2 2>/dev/null || true
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  podman rm -f -t 0 $(podman ps -aq --filter "label=gpuwerk.bench=$$") >/dev/null 2>&1 || true
  if [[ -n ${host_id:-} ]]; then
    podman rm -f -t 0 $(podman ps -aq --filter "label=gpuwerk.host=$host_id") >/dev/null 2>&1 || true
  fi
  bash scripts/engine.sh stop "$work/engine" >/dev/null 2>&1 || true
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
bash scripts/engine.sh start "$work/engine" 2>/dev/null
engine=unix://$work/engine/podman.sock

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# Waits until 127.0.0.1:$1 sends an SSH banner (sshd accepting), at most 60 s.
wait_banner() {
  local deadline=$((SECONDS + 60))
  until [[ $(timeout 0.5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && head -c 8 <&3" 2>/dev/null) == SSH-2.0- ]]; do
    ((SECONDS < deadline)) || { echo "no sshd on port $1" >&2; return 1; }
    sleep 0.02
  done
}

GPUWERK_OPERATOR_EMAIL=bench@example.test GPUWERK_OPERATOR_PASSWORD='bench password 1' \
  "$gpuwerk" server --data "$work/data" --listen "127.0.0.1:$port" --log-level warn \
  --password-hash-cost test-only-minimum >"$work/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -sf "$url/healthz" >/dev/null && break; sleep 0.1; done
jar=$work/cookies
curl -sf -c "$jar" -H 'Content-Type: application/json' \
  -d '{"email":"bench@example.test","password":"bench password 1"}' "$url/api/v1/auth/login" >/dev/null
token=$(curl -sf -b "$jar" -H 'Content-Type: application/json' -d '{"name":"bench"}' \
  "$url/api/v1/tokens" | jq -r .token)
api() { curl -sf -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "$@"; }
host_token=$(api -d '{"name":"bench-host","gpu_type":"spark-1x","gpu_required":false,"ssh_address":"127.0.0.1"}' \
  "$url/api/v1/admin/hosts" | jq -r .token)
host_id=$(api "$url/api/v1/admin/hosts" | jq -r '.items[0].id')
GPUWERK_HOST_TOKEN=$host_token "$gpuwerk" agent --server "$url" --engine "$engine" \
  --state-dir "$work/agent" --log-level warn >"$work/agent.log" 2>&1 &
pids+=($!)
ssh-keygen -q -N '' -t ed25519 -C bench -f "$work/key" </dev/null
key_id=$(jq -n --rawfile k "$work/key.pub" '{name:"bench", public_key:$k}' |
  api -d @- "$url/api/v1/ssh-keys" | jq -r .id)
for _ in $(seq 100); do
  [[ $(api "$url/api/v1/gpu-types" | jq '.items[] | select(.name=="spark-1x") | .free_capacity') == 1 ]] && break
  sleep 0.1
done

# Polls the instance until `jq filter` is true of it; prints the instance JSON.
wait_instance() {
  local id=$1 filter=$2 deadline=$((SECONDS + 60)) body
  while ((SECONDS < deadline)); do
    body=$(api "$url/api/v1/instances/$id") && jq -e "$filter" <<<"$body" >/dev/null && { echo "$body"; return; }
    sleep 0.02
  done
  echo "instance $id: timed out waiting for $filter" >&2
  return 1
}

raw=() api_accept=() api_running=() restart_running=() restart_accept=()
for i in $(seq "$rounds"); do
  # The raw engine: podman run, then sshd accepting.
  t0=$(now)
  podman run -d --name "bench-raw-$$-$i" --label "gpuwerk.bench=$$" -p 127.0.0.1::22 "$image" >/dev/null
  raw_port=$(podman port "bench-raw-$$-$i" 22/tcp | head -1 | sed 's/.*://')
  wait_banner "$raw_port"
  raw+=("$(elapsed "$t0" "$(now)")")
  podman rm -f -t 0 "bench-raw-$$-$i" >/dev/null

  # gpuwerk: the API call, then sshd accepting, then `running`.
  t0=$(now)
  id=$(api -d "{\"name\":\"b$i\",\"ssh_key_id\":\"$key_id\",\"gpu_type\":\"spark-1x\"}" \
    "$url/api/v1/instances" | jq -r .id)
  in=$(wait_instance "$id" '.ssh_command != null')
  wait_banner "$(jq -r '.ssh_command | split(" ")[2]' <<<"$in")"
  api_accept+=("$(elapsed "$t0" "$(now)")")
  wait_instance "$id" '.status == "running"' >/dev/null
  api_running+=("$(elapsed "$t0" "$(now)")")

  # Restart: the API call, then `running` again, then sshd accepting on the (new) port.
  t0=$(now)
  api -X POST "$url/api/v1/instances/$id/restart" >/dev/null
  in=$(wait_instance "$id" '.status == "running"')
  restart_running+=("$(elapsed "$t0" "$(now)")")
  wait_banner "$(jq -r '.ssh_command | split(" ")[2]' <<<"$in")"
  restart_accept+=("$(elapsed "$t0" "$(now)")")

  api -X DELETE "$url/api/v1/instances/$id" >/dev/null
  for _ in $(seq 300); do
    [[ $(api "$url/api/v1/gpu-types" | jq '.items[] | select(.name=="spark-1x") | .free_capacity') == 1 ]] && break
    sleep 0.05
  done
done

m_raw=$(printf '%s\n' "${raw[@]}" | median)
m_accept=$(printf '%s\n' "${api_accept[@]}" | median)
m_running=$(printf '%s\n' "${api_running[@]}" | median)
m_rs_running=$(printf '%s\n' "${restart_running[@]}" | median)
m_rs_accept=$(printf '%s\n' "${restart_accept[@]}" | median)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "launch latency, median of $rounds, $(nproc) cores, engine $(podman version --format '{{.Server.Version}}' 2>/dev/null || echo podman) (runc)"
printf 'podman run → sshd accepting               %6.3f s\n' "$m_raw"
printf 'POST /instances → sshd accepting          %6.3f s   ratio %s (target <= 1.30)\n' "$m_accept" "$(ratio "$m_accept" "$m_raw")"
printf 'POST /instances → status running (C05)    %6.3f s   ratio %s\n' "$m_running" "$(ratio "$m_running" "$m_raw")"
printf 'POST …/restart → status running           %6.3f s\n' "$m_rs_running"
printf 'POST …/restart → sshd accepting           %6.3f s\n' "$m_rs_accept"
