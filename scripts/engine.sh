#!/usr/bin/env bash
# Starts or stops a podman service that serves the Docker Engine API on a unix socket, for hosts
# without a Docker daemon (build machines, CI, tests). Needs root (rootful podman).
#
#   scripts/engine.sh start SOCKET_DIR   # serves unix://SOCKET_DIR/podman.sock; pid in SOCKET_DIR/podman.pid
#   scripts/engine.sh stop SOCKET_DIR    # stops the service started there (containers keep running)
#
# The service uses the project's config/containers.conf (runc, cgroupfs, default ulimits), named
# by CONTAINERS_CONF, so nothing under /etc changes. `start` returns once `GET /_ping` answers on
# the socket (at most GPUWERK_ENGINE_START_SECONDS, default 30), and fails with the service's log
# otherwise. The log is SOCKET_DIR/podman.log. Not `/version`: podman 4.3 runs `dpkg-query` for
# the runtime's and conmon's packages on each one, seconds on a loaded machine, and every probe
# given up on leaves them running.
set -euo pipefail

usage() { echo "usage: $0 start|stop SOCKET_DIR" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
cmd=$1
dir=$2
root=$(cd "$(dirname "$0")/.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/config/containers.conf}
sock=$dir/podman.sock
pidfile=$dir/podman.pid
log=$dir/podman.log

case $cmd in
  start)
    mkdir -p "$dir"
    if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      echo "engine: already running (pid $(cat "$pidfile")) on $sock" >&2
      exit 0
    fi
    rm -f "$sock"
    # setsid: the service does not get the caller's Ctrl-C; stop it with `stop`.
    setsid podman system service --time=0 "unix://$sock" >"$log" 2>&1 </dev/null &
    echo $! >"$pidfile"
    deadline=$((SECONDS + ${GPUWERK_ENGINE_START_SECONDS:-30}))
    until curl -fsS --max-time 2 --unix-socket "$sock" http://localhost/_ping >/dev/null 2>&1; do
      if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        echo "engine: podman system service exited; its log:" >&2
        cat "$log" >&2
        rm -f "$pidfile"
        exit 1
      fi
      if ((SECONDS >= deadline)); then
        echo "engine: no answer on $sock after ${GPUWERK_ENGINE_START_SECONDS:-30} s; its log:" >&2
        cat "$log" >&2
        kill "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
        exit 1
      fi
      sleep 0.1
    done
    echo "engine: serving unix://$sock (pid $(cat "$pidfile"))" >&2
    ;;
  stop)
    [[ -f $pidfile ]] || exit 0
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    fi
    rm -f "$pidfile" "$sock"
    ;;
  *) usage ;;
esac
