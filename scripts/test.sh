#!/usr/bin/env bash
# lethe's test command: installs what the tests need (the Python venv for interop tests, with
# PyIceberg and SeaweedFS's `weed`; Spark 3.5 + Iceberg 1.10 for the format v3 interop tests),
# starts the real servers the tests talk to (SeaweedFS S3 + Iceberg REST catalog, PostgreSQL;
# see docs/services.md) on 127.0.0.1 and free ports, runs every test of the workspace,
# failpoints included, and stops the servers whatever happens. It also starts a Ballista
# cluster with lethe's operators (scripts/ballista.sh) for the `--engine ballista` tests, found
# through LETHE_BALLISTA_SCHEDULER and LETHE_BALLISTA_DIR. CI runs exactly this.
#   LETHE_SERVICES=all|seaweedfs|postgres|none   which servers to start (default all)
#   LETHE_SERVICES_SMOKE=1                       check them first with scripts/services_smoke.py
# The tests find the servers through the variables of STATE_DIR/env (LETHE_S3_ENDPOINT,
# LETHE_REST_URI, LETHE_PG_URI, …), exported here, and LETHE_SERVICES_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
export LETHE_PYTHON="${LETHE_PYTHON:-$(bash scripts/python-env.sh)}"
# Spark 3.5 + the Iceberg 1.10 runtime for the format v3 interop tests, installed and cached by
# spark-env.sh. It needs Java 17 (or 11): when spark-env.sh finds none (exit 3), a JDK 17 is
# installed from Debian (openjdk-17-jdk-headless: javac too, for the REST catalog client) and
# spark-env.sh runs again. The Spark tests never skip: if Spark still can't run, this fails.
install_jdk17() {
  local apt=(apt-get)
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      apt=(sudo -n apt-get)
    else
      echo "scripts/test.sh: no Java 17/11 and not root: install openjdk-17-jdk-headless (apt-get install openjdk-17-jdk-headless), then run again" >&2
      return 1
    fi
  fi
  echo "scripts/test.sh: no Java 17/11: installing openjdk-17-jdk-headless from Debian" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! "${apt[@]}" install -y -q --no-install-recommends openjdk-17-jdk-headless >&2; then
    "${apt[@]}" update -q >&2
    "${apt[@]}" install -y -q --no-install-recommends openjdk-17-jdk-headless >&2
  fi
}
spark_setup() {
  local err rc vars
  err="$(mktemp)"
  set +e
  vars="$(bash scripts/spark-env.sh 2>"$err")"
  rc=$?
  set -e
  cat "$err" >&2
  rm -f "$err"
  if [ "$rc" -eq 0 ]; then
    while IFS='=' read -r k v; do
      [ -n "$k" ] && export "$k=$v"
    done <<<"$vars"
  fi
  return "$rc"
}
if [ -z "${LETHE_SPARK_PYTHON:-}" ]; then
  spark_rc=0
  spark_setup || spark_rc=$?
  if [ "$spark_rc" -eq 3 ]; then
    install_jdk17
    spark_rc=0
    spark_setup || spark_rc=$?
  fi
  if [ "$spark_rc" -ne 0 ]; then
    echo "scripts/spark-env.sh failed (exit $spark_rc): the Spark interop tests can't run" >&2
    exit "$spark_rc"
  fi
fi
export RUST_BACKTRACE=1
services="${LETHE_SERVICES:-all}"
if [ "$services" != none ]; then
  LETHE_SERVICES_DIR="$(mktemp -d "${TMPDIR:-/tmp}/lethe-services.XXXXXX")"
  export LETHE_SERVICES_DIR
  # Stop the servers on every way out: normal exit, a failed test, Ctrl-C, SIGTERM. If this shell
  # is killed outright (SIGKILL), the watchdog services.sh starts for LETHE_SERVICES_OWNER_PID
  # stops them within a second.
  cleanup() { bash scripts/services.sh stop "$LETHE_SERVICES_DIR" || true; rm -rf "$LETHE_SERVICES_DIR"; }
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  LETHE_SERVICES_OWNER_PID=$$ bash scripts/services.sh start "$services" "$LETHE_SERVICES_DIR"
  set -a
  # shellcheck disable=SC1091
  . "$LETHE_SERVICES_DIR/env"
  set +a
  if [ "${LETHE_SERVICES_SMOKE:-0}" = 1 ]; then "$LETHE_PYTHON" scripts/services_smoke.py; fi
fi
# The Ballista cluster (scripts/ballista.sh: a scheduler and two executors) runs the `lethe`
# binary the tests are built with, so the tests are built first. LETHE_BALLISTA=0 skips it.
if [ "${LETHE_BALLISTA:-1}" = 1 ]; then
  cargo test --workspace --features lethe-cli/failpoints --no-run "$@"
  LETHE_BALLISTA_STATE="$(mktemp -d "${TMPDIR:-/tmp}/lethe-ballista.XXXXXX")"
  cleanup_ballista() { bash scripts/ballista.sh stop "$LETHE_BALLISTA_STATE" || true; rm -rf "$LETHE_BALLISTA_STATE"; }
  if [ "$services" != none ]; then
    trap 'cleanup_ballista; cleanup' EXIT
  else
    trap cleanup_ballista EXIT
  fi
  # A fresh cluster secret (ballista.sh writes it, mode 0600, and exports its file for the tests).
  LETHE_CLUSTER_SECRET_FILE= \
  LETHE_EXECUTOR_LOG="${LETHE_EXECUTOR_LOG:-info,ballista_executor=debug,ballista_core=debug,lethe_ballista=debug,lethe_iceberg=debug,lethe_scan=debug}" LETHE_SERVICES_OWNER_PID=$$ \
    bash scripts/ballista.sh start "$LETHE_BALLISTA_STATE" 2
  set -a
  # shellcheck disable=SC1091
  . "$LETHE_BALLISTA_STATE/ballista.env"
  set +a
fi
cargo test --workspace --features lethe-cli/failpoints --no-fail-fast "$@"
