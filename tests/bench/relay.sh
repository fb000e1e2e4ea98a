#!/usr/bin/env bash
# Benchmark (issue 4): the SSH relay against the two ways people would otherwise reach an
# instance. One `gpuwerk up` (release build) with one instance; for each cipher, the throughput of
# `cat > /dev/null` for SIZE bytes and the latency of `ssh … true` (median of ROUNDS):
#   direct  ssh -p PORT root@127.0.0.1                 (the instance's own sshd)
#   relay   ssh -p RELAY <hostname>@127.0.0.1          (gpuwerk's relay)
#   jump    ssh -J root@127.0.0.1:JUMP -p PORT root@…  (OpenSSH as a bastion: a local sshd)
# Prints MB/s, ms and the ratios. Targets: relay throughput >= 1.0x jump; relay latency <=
# direct + 50 ms.
#
# Usage: tests/bench/relay.sh [size_mib=1024] [rounds=10]        (root; builds build/release)
set -euo pipefail
cd "$(dirname "$0")/../.."
size_mib=${1:-1024}
rounds=${2:-10}
root=$PWD

bash scripts/setup.sh >/dev/null
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUWERK_TESTS=OFF \
  -DGPUWERK_BENCH=OFF >/dev/null
ninja -C build/release gpuwerk >/dev/null
gpuwerk=$root/build/release/src/app/gpuwerk
bash scripts/instance-image/build.sh localhost/gpuwerk-instance:bookworm >/dev/null

export CONTAINERS_CONF=$root/config/containers.conf
work=$(mktemp -d)
http_port=$((20000 + RANDOM % 20000))
relay_port=$((http_port + 1))
jump_port=$((http_port + 2))
url=http://127.0.0.1:$http_port
pids=()
cleanup() {
  local rc=$?
  ((rc == 0)) || { echo "relay.sh failed ($rc); the up log:" >&2; tail -20 "$work/up.log" >&2 || true; }
  if [[ -n ${id:-} ]]; then
    curl -sf -X DELETE -H "Authorization: Bearer $token" "$url/api/v1/instances/$id" >/dev/null || true
    sleep 2
  fi
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ -n ${id:-} ]]; then
    podman rm -f -t 0 $(podman ps -aq --filter "label=gpuwerk.instance=$id") >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

"$gpuwerk" up --data "$work/data" --listen "127.0.0.1:$http_port" \
  --ssh-listen "127.0.0.1:$relay_port" --log-level warn >"$work/up.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do grep -q 'Press Ctrl-C' "$work/up.log" 2>/dev/null && break; sleep 0.1; done
jar=$work/cookies
curl -sf -c "$jar" -H 'Content-Type: application/json' \
  -d "{\"email\":\"operator@gpuwerk.local\",\"password\":\"$(cat "$work/data/operator-password")\"}" \
  "$url/api/v1/auth/login" >/dev/null
token=$(curl -sf -b "$jar" -H 'Content-Type: application/json' -d '{"name":"bench"}' \
  "$url/api/v1/tokens" | jq -r .token)
api() { curl -sf -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "$@"; }
ssh-keygen -q -N '' -t ed25519 -C bench -f "$work/key" </dev/null
key_id=$(jq -n --rawfile k "$work/key.pub" '{name:"bench", public_key:$k}' |
  api -d @- "$url/api/v1/ssh-keys" | jq -r .id)
id=$(api -d "{\"name\":\"bench\",\"ssh_key_id\":\"$key_id\",\"gpu_type\":\"spark-1x\"}" \
  "$url/api/v1/instances" | jq -r .id)
for _ in $(seq 600); do
  in=$(api "$url/api/v1/instances/$id")
  [[ $(jq -r .status <<<"$in") == running ]] && break
  sleep 0.1
done
hostname=$(jq -r .hostname <<<"$in")
direct_port=$(podman port "$(podman ps -q --filter "label=gpuwerk.instance=$id")" 22/tcp | head -1 | sed 's/.*://')

# The jump host: a local sshd that lets root in with the bench key and forwards TCP.
mkdir -p "$work/jump"
ssh-keygen -q -N '' -t ed25519 -f "$work/jump/host_key" </dev/null
cp "$work/key.pub" "$work/jump/authorized_keys"
chmod 700 "$work/jump"
chmod 600 "$work/jump/authorized_keys"
cat >"$work/jump/sshd_config" <<EOF
Port $jump_port
ListenAddress 127.0.0.1
HostKey $work/jump/host_key
AuthorizedKeysFile $work/jump/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
AllowTcpForwarding yes
PidFile $work/jump/sshd.pid
EOF
mkdir -p /run/sshd
/usr/sbin/sshd -D -e -f "$work/jump/sshd_config" 2>"$work/jump/log" &
pids+=($!)
sleep 0.5

# One client configuration for every path (OpenSSH passes it to the jump's own ssh as well).
cat >"$work/ssh_config" <<EOF
Host jump
  HostName 127.0.0.1
  Port $jump_port
  User root
Host *
  IdentityFile $work/key
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  BatchMode yes
  LogLevel ERROR
EOF
path_cmd() {  # the ssh command line for a path, without the remote command
  case $1 in
    direct) echo ssh -F "$work/ssh_config" -p "$direct_port" root@127.0.0.1 ;;
    relay) echo ssh -F "$work/ssh_config" -p "$relay_port" "$hostname@127.0.0.1" ;;
    jump) echo ssh -F "$work/ssh_config" -J jump -p "$direct_port" root@127.0.0.1 ;;
  esac
}
now() { date +%s.%N; }
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

declare -A mbps latency
for cipher in aes128-gcm@openssh.com chacha20-poly1305@openssh.com; do
  for path in direct relay jump; do
    cmd=$(path_cmd "$path")
    $cmd -c "$cipher" true  # warm up, and fail early
    t0=$(now)
    head -c "$((size_mib * 1024 * 1024))" /dev/zero | $cmd -c "$cipher" 'cat > /dev/null'
    t1=$(now)
    mbps[$cipher.$path]=$(awk -v s="$size_mib" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", s * 1.048576 / (b - a)}')
    samples=()
    for _ in $(seq "$rounds"); do
      t0=$(now)
      $cmd -c "$cipher" true
      samples+=("$(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.1f", (b - a) * 1000}')")
    done
    latency[$cipher.$path]=$(printf '%s\n' "${samples[@]}" | median)
  done
done

echo "SSH paths, ${size_mib} MiB of zeros into cat, ssh … true median of $rounds; $(nproc) cores"
for cipher in aes128-gcm@openssh.com chacha20-poly1305@openssh.com; do
  echo "cipher $cipher"
  for path in direct relay jump; do
    printf '  %-7s %6s MB/s %8s ms\n' "$path" "${mbps[$cipher.$path]}" "${latency[$cipher.$path]}"
  done
  printf '  relay/jump throughput %s (target >= 1.00); relay - direct latency %s ms (target <= 50)\n' \
    "$(awk -v a="${mbps[$cipher.relay]}" -v b="${mbps[$cipher.jump]}" 'BEGIN {printf "%.2f", a / b}')" \
    "$(awk -v a="${latency[$cipher.relay]}" -v b="${latency[$cipher.direct]}" 'BEGIN {printf "%.1f", a - b}')"
done
