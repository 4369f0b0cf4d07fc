#!/usr/bin/env bash
# Installs the Spark engine the interop tests use as the "other engine": Spark 3.5 (PyPI
# `pyspark`) with the Iceberg 1.10 Spark runtime (PyPI `snowpark-connect-deps-iceberg`, which
# ships iceberg-spark-runtime-3.5_2.12-1.10.2.jar), plus the JDBC drivers for the SQL catalog
# (Debian `libxerial-sqlite-jdbc-java`, `libpostgresql-jdbc-java`).
#
# Everything is cached outside the clone, in $LETHE_SPARK_HOME (default ~/.cache/lethe-spark),
# and reused when complete (a stamp file records the versions). From nothing it takes ~1 min.
#
# Known problem it works around: that runtime jar references its shaded Jackson
# (org.apache.iceberg.shaded.com.fasterxml.jackson.*) and shaded httpclient5
# (org.apache.iceberg.shaded.org.apache.hc.*) but ships neither. This script relocates
# pyspark's own Jackson jars into org.apache.iceberg.shaded. with Debian's jarjar
# (`libjarjar-java`) and puts the result on the classpath. httpclient5 is not provided
# (the runtime needs >= 5.4; Debian has 5.2.1), so Iceberg's REST catalog client does not
# work; see docs/spark.md.
#
# Output (stdout), one KEY=VALUE per line, safe to `eval`:
#   LETHE_SPARK_PYTHON=...   the venv python to run scripts/spark_tool.py with
#   LETHE_SPARK_JAVA_HOME=... a Java that Spark 3.5 runs on (17, or 11)
#   LETHE_SPARK_JARS=...     comma-separated jars for spark.jars (runtime, shaded Jackson, JDBC)
#   LETHE_SPARK_VERSION=...  / LETHE_ICEBERG_VERSION=...
# Progress goes to stderr.
#
# Exit codes: 0 ready; 3 no usable Java (tests skip with the message printed on stderr);
# 1 anything else (a failed install is a failure, not a skip).
set -euo pipefail

PYSPARK_VERSION=3.5.7
DEPS_PKG=snowpark-connect-deps-iceberg
DEPS_VERSION=1.0.3
ICEBERG_VERSION=1.10.2
RUNTIME_JAR=iceberg-spark-runtime-3.5_2.12-${ICEBERG_VERSION}.jar
EXIT_NO_JAVA=3

home="${LETHE_SPARK_HOME:-$HOME/.cache/lethe-spark}"
venv="$home/venv"
jars="$home/jars"
stamp="$home/READY"
want_stamp="pyspark=$PYSPARK_VERSION $DEPS_PKG=$DEPS_VERSION jackson-relocated=1"

log() { echo "spark-env: $*" >&2; }

# --- Java: Spark 3.5 runs on 8/11/17; pick 17 (or 11) even if a newer one is first ---------
java_major() { # $1 = java binary; prints the major version or nothing
  "$1" -version 2>&1 | sed -nE '1s/.*version "([0-9]+)(\.([0-9]+))?.*/\1 \3/p' |
    awk '{ if ($1 == 1) print $2; else print $1 }'
}
find_java_home() {
  local cand java major
  for cand in "${LETHE_SPARK_JAVA_HOME:-}" "${JAVA_HOME:-}" \
    "$(dirname "$(dirname "$(readlink -f "$(command -v java 2>/dev/null || echo /nonexistent)")")")" \
    /usr/lib/jvm/java-17-openjdk-* /usr/lib/jvm/*17* /usr/lib/jvm/java-11-openjdk-* /usr/lib/jvm/*11*; do
    [ -n "$cand" ] || continue
    java="$cand/bin/java"
    [ -x "$java" ] || continue
    major="$(java_major "$java")"
    case "$major" in
      17 | 11) echo "$cand"; return 0 ;;
    esac
  done
  return 1
}
if ! java_home="$(find_java_home)"; then
  seen="$(command -v java >/dev/null 2>&1 && java -version 2>&1 | head -1 || echo "no java on PATH")"
  echo "spark-env: no Java 17 or 11 found (Spark 3.5 needs one; found: $seen)." >&2
  echo "spark-env: install it (Debian: apt-get install openjdk-17-jre-headless) or set LETHE_SPARK_JAVA_HOME; Spark tests are skipped." >&2
  exit "$EXIT_NO_JAVA"
fi

# --- Debian packages: JDBC drivers (always needed), jarjar (only to build the cache) -------
need_debs=()
[ -f /usr/share/java/sqlite-jdbc.jar ] || need_debs+=(libxerial-sqlite-jdbc-java)
[ -f /usr/share/java/postgresql.jar ] || need_debs+=(libpostgresql-jdbc-java)
cache_ok=false
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want_stamp" ] && [ -x "$venv/bin/python" ] &&
  [ -f "$jars/$RUNTIME_JAR" ] && [ -f "$jars/iceberg-shaded-jackson.jar" ]; then
  cache_ok=true
fi
$cache_ok || [ -f /usr/share/java/jarjar.jar ] || need_debs+=(libjarjar-java)
if [ "${#need_debs[@]}" -gt 0 ]; then
  log "installing Debian packages: ${need_debs[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    log "not root: install them yourself (apt-get install ${need_debs[*]})"
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q "${need_debs[@]}" >&2; then
    apt-get update -q >&2
    apt-get install -y -q "${need_debs[@]}" >&2
  fi
fi

emit() {
  echo "LETHE_SPARK_PYTHON=$venv/bin/python"
  echo "LETHE_SPARK_JAVA_HOME=$java_home"
  echo "LETHE_SPARK_JARS=$jars/$RUNTIME_JAR,$jars/iceberg-shaded-jackson.jar,/usr/share/java/sqlite-jdbc.jar,/usr/share/java/postgresql.jar"
  echo "LETHE_SPARK_VERSION=$PYSPARK_VERSION"
  echo "LETHE_ICEBERG_VERSION=$ICEBERG_VERSION"
}

if $cache_ok && "$venv/bin/python" -c "import pyspark; assert pyspark.__version__ == '$PYSPARK_VERSION'" 2>/dev/null; then
  emit
  exit 0
fi

# --- Build the cache from nothing ----------------------------------------------------------
log "building $home (pyspark $PYSPARK_VERSION, $DEPS_PKG $DEPS_VERSION)"
rm -rf "$home"
mkdir -p "$home" "$jars"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

python3 -m venv "$venv" >&2
"$venv/bin/pip" install --quiet --disable-pip-version-check "pyspark==$PYSPARK_VERSION" >&2

# The runtime jar: the wheel is only a carrier (76 MB); keep just the jar we use.
"$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$tmp/whl" \
  "$DEPS_PKG==$DEPS_VERSION" >&2
"$venv/bin/python" - "$tmp/whl" "$jars" "$RUNTIME_JAR" <<'PY'
import glob, os, sys, zipfile
whl_dir, out_dir, name = sys.argv[1:]
(whl,) = glob.glob(os.path.join(whl_dir, "*.whl"))
with zipfile.ZipFile(whl) as z:
    member = next(m for m in z.namelist() if m.endswith("/jars/" + name))
    with z.open(member) as src, open(os.path.join(out_dir, name), "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY

# Shaded Jackson: merge pyspark's jackson-annotations/core/databind/datatype-jsr310 into one jar,
# then relocate com.fasterxml.jackson.** into org.apache.iceberg.shaded.
pyspark_jars="$("$venv/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
"$venv/bin/python" - "$pyspark_jars" "$tmp/jackson-merged.jar" <<'PY'
import glob, os, sys, zipfile
src_dir, out = sys.argv[1:]
seen = set()
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
    for art in ("annotations", "core", "databind", "datatype-jsr310"):
        found = sorted(glob.glob(os.path.join(src_dir, f"jackson-{art}-2.*.jar")))
        if not found:
            sys.exit(f"spark-env: pyspark ships no jackson-{art} jar")
        with zipfile.ZipFile(found[0]) as src:
            for m in src.namelist():
                # classes and resources only: no manifest, module descriptors, multi-release
                # variants or service files (they would name the unrelocated classes)
                if (m.endswith("/") or m in seen or m.startswith("META-INF/")
                        or m.endswith("module-info.class")):
                    continue
                seen.add(m)
                dst.writestr(m, src.read(m))
PY
echo 'rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1' >"$tmp/rules.txt"
"$java_home/bin/java" -jar /usr/share/java/jarjar.jar process "$tmp/rules.txt" "$tmp/jackson-merged.jar" \
  "$jars/iceberg-shaded-jackson.jar" >&2
unzip -l "$jars/iceberg-shaded-jackson.jar" |
  grep -q 'org/apache/iceberg/shaded/com/fasterxml/jackson/databind/ObjectMapper.class' ||
  { log "relocation produced no shaded ObjectMapper"; exit 1; }

echo "$want_stamp" >"$stamp"
log "ready"
emit
