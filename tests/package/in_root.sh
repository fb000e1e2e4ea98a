#!/usr/bin/env bash
# The part of tests/package/package_test.sh that runs inside the test root (systemd as PID 1):
# installs $DEB, checks what installing did, configures and starts the three units, removes it.
set -euo pipefail
start=$SECONDS
say() { echo "in_root: [$((SECONDS - start)) s] $*"; }
fail() { echo "in_root: FAILED: $*" >&2; exit 1; }
units=(gpuwerk-server gpuwerk-agent gpuwerk-relay)
# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local limit=$1
  shift
  for _ in $(seq $((limit * 4))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.25
  done
  return 1
}
main_user() { ps -o user= -p "$(systemctl show -p MainPID --value "$1")"; }

say "dpkg -i"
DEBIAN_FRONTEND=noninteractive dpkg -i "$DEB" >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "dpkg -i"; }
getent passwd gpuwerk >/dev/null || fail "no gpuwerk user"
[[ $(getent passwd gpuwerk | cut -d: -f7) == /usr/sbin/nologin ]] || fail "gpuwerk has a shell"
[[ $(stat -c '%a %U %G' /etc/gpuwerk) == '750 root gpuwerk' ]] ||
  fail "/etc/gpuwerk is $(stat -c '%a %U %G' /etc/gpuwerk)"
for u in "${units[@]}"; do
  enabled=$(systemctl is-enabled "$u" || true)
  [[ $enabled == disabled ]] || fail "$u is '$enabled' after install, not disabled"
  ! systemctl -q is-active "$u" || fail "$u runs before it is configured"
done
systemd-analyze verify /usr/lib/systemd/system/gpuwerk-{server,agent,relay}.service \
  >/tmp/verify.log 2>&1 || { cat /tmp/verify.log; fail "systemd-analyze verify"; }
# LeakSanitizer (a sanitizer build) stops the world with ptrace, which SystemCallFilter refuses.
if ldd /usr/bin/gpuwerk | grep -q libasan; then
  for u in "${units[@]}"; do
    mkdir -p "/etc/systemd/system/$u.service.d"
    printf '[Service]\nEnvironment=ASAN_OPTIONS=detect_leaks=0\n' \
      >"/etc/systemd/system/$u.service.d/sanitizer.conf"
  done
  systemctl daemon-reload
fi

say "server"
install -m 0640 -o root -g gpuwerk /dev/stdin /etc/gpuwerk/server.conf <<'CONF'
data_dir = "/var/lib/gpuwerk/server"
listen = "127.0.0.1:8080"
public_url = "http://127.0.0.1:8080"
operator_email = "ops@example.com"
operator_password = "package-test-password"
password_hash_cost = "test-only-minimum"
CONF
systemctl enable --now gpuwerk-server
wait_for 90 curl -fsS http://127.0.0.1:8080/healthz || fail "the server does not answer /healthz"
[[ $(main_user gpuwerk-server) == gpuwerk ]] || fail "the server runs as $(main_user gpuwerk-server)"
[[ -f /var/lib/gpuwerk/server/gpuwerk.db ]] || fail "no store in /var/lib/gpuwerk/server"
[[ $(stat -c '%a %U' /var/lib/gpuwerk/server) == '700 gpuwerk' ]] ||
  fail "/var/lib/gpuwerk/server is $(stat -c '%a %U' /var/lib/gpuwerk/server)"

export HOME=/root
printf 'package-test-password' |
  gpuwerk login --url http://127.0.0.1:8080 --email ops@example.com --password-stdin >/dev/null
host_token=$(gpuwerk admin hosts add pkg-host --gpu-type spark-1x --no-gpu \
  --ssh-address 127.0.0.1 --json | jq -er .token)
relay_token=$(gpuwerk admin relays add pkg-relay --json | jq -er .token)

say "relay and agent"
install -m 0640 -o root -g gpuwerk /dev/stdin /etc/gpuwerk/relay.conf <<CONF
server_url = "http://127.0.0.1:8080"
relay_token = "$relay_token"
ssh_listen = "127.0.0.1:2222"
CONF
# No container engine in the test root: the agent runs, syncs and reports the engine away.
install -m 0600 /dev/stdin /etc/gpuwerk/agent.conf <<CONF
server_url = "http://127.0.0.1:8080"
host_token = "$host_token"
engine = "unix:///run/package-test-no-engine.sock"
ssh_bind = "127.0.0.1"
instance_network_isolation = "off"
CONF
systemctl enable --now gpuwerk-relay gpuwerk-agent
ssh_banner() { [[ $(timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/2222; head -c 4 <&3') == SSH- ]]; }
wait_for 60 ssh_banner || fail "the relay does not answer SSH on 127.0.0.1:2222"
[[ $(main_user gpuwerk-relay) == gpuwerk ]] || fail "the relay runs as $(main_user gpuwerk-relay)"
key=/var/lib/gpuwerk/relay/host_key
[[ $(stat -c '%a %U' $key) == '600 gpuwerk' ]] || fail "$key is $(stat -c '%a %U' $key)"
# A whole key exchange under the unit's sandbox, showing the host key of its state directory.
shown=$(ssh-keyscan -T 20 -t ed25519 -p 2222 127.0.0.1 2>/dev/null | awk '{print $3}')
[[ -n $shown && $shown == "$(ssh-keygen -y -f $key | awk '{print $2}')" ]] ||
  fail "the relay shows host key '$shown', not the one in $key"
# The probe certificate for the agents, signed at start by ssh-keygen run from the sandbox.
journalctl -u gpuwerk-relay --no-pager | grep -q 'ssh-ed25519-cert-v01@openssh.com AAAA' ||
  fail "the relay logged no relay CA probe certificate"
seen() {
  gpuwerk admin hosts ls --json | jq -e '.[] | select(.name == "pkg-host") | .last_seen_at != null'
}
wait_for 60 seen || fail "the agent never synced (pkg-host has no last_seen_at)"
[[ $(main_user gpuwerk-agent) == root ]] || fail "the agent runs as $(main_user gpuwerk-agent)"
for u in "${units[@]}"; do
  systemctl -q is-active "$u" || fail "$u is $(systemctl is-active "$u")"
done
before=$(sha256sum $key)
systemctl restart gpuwerk-relay
wait_for 60 ssh_banner || fail "the relay does not answer SSH after a restart"
[[ $(sha256sum $key) == "$before" ]] || fail "a restart changed the relay's host key"

say "dpkg -r"
dpkg -r gpuwerk >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "dpkg -r"; }
for u in "${units[@]}"; do
  ! systemctl -q is-active "$u" || fail "$u still runs after dpkg -r"
done
[[ -d /var/lib/gpuwerk/server ]] || fail "dpkg -r removed the state"
say "done"
