#!/usr/bin/env bash
# Starts and stops a Ballista cluster with lethe's operators on 127.0.0.1: one scheduler
# (`lethe scheduler`) and N executors (`lethe executor`), each on free ports, with logs and
# work folders in STATE_DIR (a folder the caller owns; use a fresh temporary one).
#
# Usage:
#   bash scripts/ballista.sh start STATE_DIR [EXECUTORS]
#       starts the scheduler and EXECUTORS executors (default 2), waits until every executor
#       has registered, then writes STATE_DIR/ballista.env (`export NAME=value` lines).
#       With LETHE_SERVICES_OWNER_PID=PID set, a watchdog stops everything once PID has exited.
#   bash scripts/ballista.sh stop STATE_DIR
#       stops everything started in STATE_DIR (idempotent); leaves the logs to the caller.
#   bash scripts/ballista.sh status STATE_DIR
#       exit 0 when everything started there is still running.
#
# The `lethe` binary: LETHE_BIN, else CARGO_TARGET_DIR/debug/lethe (build it first, e.g. with
# `cargo test --workspace --features lethe-cli/failpoints --no-run`, as scripts/test.sh does).
# LETHE_EXECUTOR_LOG (default info) is the executors' log filter (the registration line, at info,
# is what start waits for, so it is always kept); the tests run them at debug
# and check that their logs hold nothing about a subject. LETHE_EXECUTOR_TASKS (default 2):
# tasks each executor runs at once. LETHE_EXECUTOR1_FAILPOINTS: FAILPOINTS for the first
# executor only (a failpoints build; the fault test makes it die mid-task).
#
# The cluster's secret (docs/cluster.md): the file LETHE_CLUSTER_SECRET_FILE names when it is
# set (so a second cluster started from the tests shares the first one's), else a fresh random
# one written to STATE_DIR/ballista/secret (mode 0600); the scheduler and executors get it with
# --secret-file. TLS when LETHE_BALLISTA_TLS_CERT, LETHE_BALLISTA_TLS_KEY and
# LETHE_BALLISTA_TLS_CA are set (PEM files; the certificate must name 127.0.0.1): the scheduler
# and every executor serve it, executors check it against the CA.
#
# Environment written: LETHE_BALLISTA_SCHEDULER (HOST:PORT), LETHE_BALLISTA_DIR,
# LETHE_BALLISTA_EXECUTOR_PIDS (space-separated), LETHE_BALLISTA_SCHEDULER_PID,
# LETHE_CLUSTER_SECRET_FILE (the secret's file, for clients), and with TLS
# LETHE_BALLISTA_TLS_CA.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

die() { echo "ballista.sh: $*" >&2; exit 1; }
log() { echo "ballista.sh: $*" >&2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }

alive() {
  [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null || return 1
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

lethe_bin() {
  if [ -n "${LETHE_BIN:-}" ]; then echo "$LETHE_BIN"; return; fi
  local target=${CARGO_TARGET_DIR:-}
  if [ -z "$target" ]; then
    target=$(cd "$here/.." && cargo metadata --format-version 1 --no-deps |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
  fi
  echo "$target/debug/lethe"
}

stop_all() {
  local state=$1 dir="$1/ballista" f pid
  [ -d "$dir" ] || return 0
  for f in "$dir"/executor-*.pid "$dir"/scheduler.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if alive "$pid"; then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  for f in "$dir"/executor-*.pid "$dir"/scheduler.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then log "pid $pid still running after 10 s: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; fi
    rm -f "$f"
  done
  if [ -f "$dir/watchdog.pid" ]; then
    pid=$(cat "$dir/watchdog.pid")
    if [ "$pid" != "$PPID" ] && [ "$pid" != "$$" ] && alive "$pid"; then kill "$pid" 2>/dev/null || true; fi
    rm -f "$dir/watchdog.pid"
  fi
  rm -f "$state/ballista.env"
}

# Executor $4 of the cluster in $1 (binary $2, scheduler port $3), in the background; its pid in
# executor-$4.pid, its log in executor-$4.log.
start_executor() {
  local dir=$1 bin=$2 port=$3 i=$4 fp=
  mkdir -p "$dir/executor-$i"
  [ "$i" = 1 ] && fp=${LETHE_EXECUTOR1_FAILPOINTS:-}
  FAILPOINTS="$fp" LETHE_LOG="${LETHE_EXECUTOR_LOG:-info},ballista_executor::executor_server=info" setsid "$bin" executor --scheduler "127.0.0.1:$port" \
    "${security[@]}" "${executor_tls[@]}" --tasks "${LETHE_EXECUTOR_TASKS:-2}" --work-dir "$dir/executor-$i/work" \
    >"$dir/executor-$i.log" 2>&1 </dev/null &
  echo $! >"$dir/executor-$i.pid"
}

start_all() {
  local state=$1 n=$2 dir="$1/ballista" bin port pid i t0 pids=""
  bin=$(lethe_bin)
  [ -x "$bin" ] || die "no lethe binary at $bin (build it first, or set LETHE_BIN)"
  if [ -f "$dir/scheduler.pid" ] && alive "$(cat "$dir/scheduler.pid")"; then die "a cluster is already running in $dir"; fi
  rm -rf "$dir"; mkdir -p "$dir"
  local secret=${LETHE_CLUSTER_SECRET_FILE:-}
  if [ -z "$secret" ]; then
    secret="$dir/secret"
    (umask 077; python3 -c 'import secrets; print(secrets.token_hex(32))' >"$secret")
  fi
  [ -f "$secret" ] || die "no cluster secret file at $secret"
  security=(--secret-file "$secret")
  server_tls=(); executor_tls=(); tls_ca=
  if [ -n "${LETHE_BALLISTA_TLS_CERT:-}" ]; then
    [ -n "${LETHE_BALLISTA_TLS_KEY:-}" ] && [ -n "${LETHE_BALLISTA_TLS_CA:-}" ] ||
      die "LETHE_BALLISTA_TLS_CERT needs LETHE_BALLISTA_TLS_KEY and LETHE_BALLISTA_TLS_CA"
    server_tls=(--tls-cert "$LETHE_BALLISTA_TLS_CERT" --tls-key "$LETHE_BALLISTA_TLS_KEY")
    executor_tls=("${server_tls[@]}" --tls-ca "$LETHE_BALLISTA_TLS_CA")
    tls_ca=$LETHE_BALLISTA_TLS_CA
  fi
  t0=$(date +%s.%N)
  for attempt in 1 2 3; do
    port=$(free_port)
    LETHE_LOG="${LETHE_SCHEDULER_LOG:-info}" setsid "$bin" scheduler --bind "127.0.0.1:$port" --executor-timeout 6s \
      "${security[@]}" "${server_tls[@]}" \
      >"$dir/scheduler.log" 2>&1 </dev/null &
    echo $! >"$dir/scheduler.pid"
    for _ in $(seq 200); do
      python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2)' "$port" 2>/dev/null && break
      alive "$(cat "$dir/scheduler.pid")" || break
      sleep 0.1
    done
    if alive "$(cat "$dir/scheduler.pid")"; then break; fi
    log "scheduler start attempt $attempt failed:"; tail -n 5 "$dir/scheduler.log" >&2 || true
    port=
  done
  [ -n "$port" ] || die "the scheduler did not start"
  for i in $(seq "$n"); do
    start_executor "$dir" "$bin" "$port" "$i"
  done
  # Ready when every executor has registered with the scheduler. Ballista 53's executor logs
  # "listening" and registers before its gRPC server accepts, and the scheduler's connection
  # back to it can be refused ("Failed to register executor ... Connection refused"): the
  # executor then exits. Such an executor is started again (up to 3 attempts, each logged).
  for i in $(seq "$n"); do
    for attempt in 1 2 3; do
      for _ in $(seq 300); do
        grep -q "registration succeed" "$dir/executor-$i.log" 2>/dev/null && break
        alive "$(cat "$dir/executor-$i.pid")" || break
        sleep 0.1
      done
      grep -q "registration succeed" "$dir/executor-$i.log" && break
      alive "$(cat "$dir/executor-$i.pid")" && { tail -n 20 "$dir/executor-$i.log" >&2; die "executor $i did not register in 30 s"; }
      tail -n 20 "$dir/executor-$i.log" >&2
      [ "$attempt" = 3 ] && die "executor $i exited during start-up (3 attempts)"
      log "executor $i exited during start-up (attempt $attempt): starting it again"
      cat "$dir/executor-$i.log" >>"$dir/executor-$i.failed.log"
      start_executor "$dir" "$bin" "$port" "$i"
    done
    pids="$pids $(cat "$dir/executor-$i.pid")"
  done
  log "Ballista ready in $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)") s (scheduler 127.0.0.1:$port, $n executors)"
  cat >"$state/ballista.env" <<EOF
export LETHE_BALLISTA_SCHEDULER=127.0.0.1:$port
export LETHE_BALLISTA_DIR=$dir
export LETHE_BALLISTA_SCHEDULER_PID=$(cat "$dir/scheduler.pid")
export LETHE_BALLISTA_EXECUTOR_PIDS="${pids# }"
export LETHE_CLUSTER_SECRET_FILE=$secret
EOF
  if [ -n "$tls_ca" ]; then echo "export LETHE_BALLISTA_TLS_CA=$tls_ca" >>"$state/ballista.env"; fi
  local owner=${LETHE_SERVICES_OWNER_PID:-}
  if [ -n "$owner" ]; then
    setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec bash "$2" stop "$3"' \
      watchdog "$owner" "$here/ballista.sh" "$state" >>"$dir/watchdog.log" 2>&1 </dev/null &
    echo $! >"$dir/watchdog.pid"
  fi
}

cmd=${1:-}
case "$cmd" in
  start)
    [ $# -ge 2 ] && [ $# -le 3 ] || usage
    state=$2; mkdir -p "$state"; state=$(cd "$state" && pwd)
    started=
    trap '[ -n "$started" ] || stop_all "$state"' EXIT
    start_all "$state" "${3:-2}"
    started=1
    ;;
  stop)
    [ $# -eq 2 ] || usage
    stop_all "$2"
    ;;
  status)
    [ $# -eq 2 ] || usage
    ok=0; any=
    for f in "$2"/ballista/scheduler.pid "$2"/ballista/executor-*.pid; do
      [ -f "$f" ] || continue
      any=1
      if alive "$(cat "$f")"; then echo "$(basename "$f" .pid): running (pid $(cat "$f"))"; else echo "$(basename "$f" .pid): not running"; ok=1; fi
    done
    [ -n "$any" ] || { echo "nothing started in $2"; ok=1; }
    exit $ok
    ;;
  *) usage ;;
esac
