#!/usr/bin/env bash
# Installs the Spark engine the interop tests use as the "other engine": Spark 3.5 (PyPI
# `pyspark`) with the Iceberg 1.10 Spark runtime (PyPI `snowpark-connect-deps-iceberg`, which
# ships iceberg-spark-runtime-3.5_2.12-1.10.2.jar), the JDBC drivers for the SQL catalog
# (Debian `libxerial-sqlite-jdbc-java`, `libpostgresql-jdbc-java`), and S3 through Hadoop's
# s3a (hadoop-aws 3.3.1 + AWS SDK v1 bundle from PyPI `sagemaker-pyspark` 1.4.5).
#
# Everything is cached outside the clone, in $LETHE_SPARK_HOME (default ~/.cache/lethe-spark),
# and reused when complete (a stamp file records the versions). From nothing: ~300 MB of
# downloads, about a minute; with the cache: a fraction of a second.
#
# Known problem it works around: that runtime jar references its shaded Jackson
# (org.apache.iceberg.shaded.com.fasterxml.jackson.*) and shaded httpclient5
# (org.apache.iceberg.shaded.org.apache.hc.*) but ships neither. This script relocates
# pyspark's own Jackson jars, and Debian's httpclient5 5.2.1 (`libhttpclient5-java`) plus a
# one-interface stand-in for 5.4's TlsSocketStrategy, into org.apache.iceberg.shaded. with
# Debian's jarjar (`libjarjar-java`). See docs/spark.md for what works.
#
# Output (stdout), one KEY=VALUE per line, safe to `eval`:
#   LETHE_SPARK_PYTHON=...    the venv python to run scripts/spark_tool.py with
#   LETHE_SPARK_JAVA_HOME=... a Java that Spark 3.5 runs on (17, or 11)
#   LETHE_SPARK_JARS=...      comma-separated jars (runtime, shaded Jackson, shaded httpclient5,
#                             hadoop-aws + AWS bundle, JDBC drivers)
#   LETHE_SPARK_REST=0|1      whether the REST catalog client is set up (needs javac)
#   LETHE_SPARK_S3=0|1        whether s3a is set up (LETHE_SPARK_S3=0 in the environment skips it)
#   LETHE_SPARK_VERSION=...   / LETHE_ICEBERG_VERSION=...
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
S3_PKG=sagemaker-pyspark
S3_PKG_VERSION=1.4.5
HADOOP_AWS_JAR=hadoop-aws-3.3.1.jar
AWS_BUNDLE_JAR=aws-java-sdk-bundle-1.11.901.jar
EXIT_NO_JAVA=3

home="${LETHE_SPARK_HOME:-$HOME/.cache/lethe-spark}"
venv="$home/venv"
jars="$home/jars"
stamp="$home/READY"
want_stamp="pyspark=$PYSPARK_VERSION $DEPS_PKG=$DEPS_VERSION jackson=1 httpclient5=1 s3=${LETHE_SPARK_S3:-1}:$S3_PKG=$S3_PKG_VERSION"

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

# --- Debian packages: JDBC drivers (used in place), jarjar + httpclient5 (to build the cache)
need_debs=()
[ -f /usr/share/java/sqlite-jdbc.jar ] || need_debs+=(libxerial-sqlite-jdbc-java)
[ -f /usr/share/java/postgresql.jar ] || need_debs+=(libpostgresql-jdbc-java)
cache_ok=false
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want_stamp" ] && [ -x "$venv/bin/python" ] &&
  [ -f "$jars/$RUNTIME_JAR" ] && [ -f "$jars/iceberg-shaded-jackson.jar" ]; then
  cache_ok=true
fi
if ! $cache_ok; then
  [ -f /usr/share/java/jarjar.jar ] || need_debs+=(libjarjar-java)
  [ -f /usr/share/java/httpclient5.jar ] || need_debs+=(libhttpclient5-java)
fi
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
  local list="$jars/$RUNTIME_JAR,$jars/iceberg-shaded-jackson.jar"
  local rest=0 s3=0
  if [ -f "$jars/iceberg-shaded-httpclient5.jar" ]; then
    list="$list,$jars/iceberg-shaded-httpclient5.jar"
    rest=1
  fi
  if [ -f "$jars/$HADOOP_AWS_JAR" ] && [ -f "$jars/$AWS_BUNDLE_JAR" ]; then
    list="$list,$jars/$HADOOP_AWS_JAR,$jars/$AWS_BUNDLE_JAR"
    s3=1
  fi
  list="$list,/usr/share/java/sqlite-jdbc.jar,/usr/share/java/postgresql.jar"
  echo "LETHE_SPARK_PYTHON=$venv/bin/python"
  echo "LETHE_SPARK_JAVA_HOME=$java_home"
  echo "LETHE_SPARK_JARS=$list"
  echo "LETHE_SPARK_REST=$rest"
  echo "LETHE_SPARK_S3=$s3"
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
java="$java_home/bin/java"

python3 -m venv "$venv" >&2
"$venv/bin/pip" install --quiet --disable-pip-version-check "pyspark==$PYSPARK_VERSION" >&2
py="$venv/bin/python"

# Copies the members of a downloaded package (wheel or sdist) whose names end with /NAME.
extract() { # $1 = archive, $2.. = jar names
  "$py" - "$jars" "$@" <<'PY'
import os, sys, tarfile, zipfile
out_dir, archive, *names = sys.argv[1:]
def copy(src, name):
    with open(os.path.join(out_dir, name), "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
found = set()
if archive.endswith(".whl"):
    with zipfile.ZipFile(archive) as z:
        for m in z.namelist():
            base = m.rsplit("/", 1)[-1]
            if base in names:
                with z.open(m) as src:
                    copy(src, base)
                found.add(base)
else:
    with tarfile.open(archive) as t:
        for m in t:
            base = m.name.rsplit("/", 1)[-1]
            if m.isfile() and base in names:
                copy(t.extractfile(m), base)
                found.add(base)
missing = set(names) - found
if missing:
    sys.exit(f"spark-env: {os.path.basename(archive)} holds no {', '.join(sorted(missing))}")
PY
}

# Merges jars into one, dropping META-INF (manifests, signatures, module descriptors,
# multi-release variants, service files naming unrelocated classes), then relocates
# PATTERN into org.apache.iceberg.shaded. with jarjar.
relocate() { # $1 = output jar, $2 = package prefix (e.g. com.fasterxml.jackson), $3.. = jars
  local out="$1" prefix="$2"
  shift 2
  "$py" - "$tmp/merged.jar" "$@" <<'PY'
import sys, zipfile
out, *srcs = sys.argv[1:]
seen = set()
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
    for path in srcs:
        with zipfile.ZipFile(path) as src:
            for m in src.namelist():
                if m.endswith("/") or m in seen or m.startswith("META-INF/") or m.endswith("module-info.class"):
                    continue
                seen.add(m)
                dst.writestr(m, src.read(m))
PY
  echo "rule $prefix.** org.apache.iceberg.shaded.$prefix.@1" >"$tmp/rules.txt"
  "$java" -jar /usr/share/java/jarjar.jar process "$tmp/rules.txt" "$tmp/merged.jar" "$out" >&2
  rm -f "$tmp/merged.jar"
}

# 1. The Iceberg runtime jar (its wheel, 76 MB, is only a carrier).
"$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$tmp/deps" \
  "$DEPS_PKG==$DEPS_VERSION" >&2
extract "$(ls "$tmp"/deps/*.whl)" "$RUNTIME_JAR"

# 2. Shaded Jackson from pyspark's own jars.
pyspark_jars="$("$py" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
jackson=()
for a in annotations core databind datatype-jsr310; do
  j="$(ls "$pyspark_jars"/jackson-"$a"-2.*.jar 2>/dev/null | head -1)"
  [ -n "$j" ] || { log "pyspark ships no jackson-$a jar"; exit 1; }
  jackson+=("$j")
done
relocate "$jars/iceberg-shaded-jackson.jar" com.fasterxml.jackson "${jackson[@]}"
"$py" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).getinfo(sys.argv[2])' \
  "$jars/iceberg-shaded-jackson.jar" org/apache/iceberg/shaded/com/fasterxml/jackson/databind/ObjectMapper.class ||
  { log "relocation produced no shaded ObjectMapper"; exit 1; }

# 3. Shaded httpclient5 for the REST catalog client: Debian's 5.2.1, relocated, plus a stand-in
#    for 5.4's TlsSocketStrategy interface. Iceberg's HTTPClient names that type on every build
#    of a client but uses it only when rest.client.tls.configurer-impl is set; without that
#    setting (plain HTTP, or HTTPS with the JVM's default trust) 5.2.1 does the work. Needs javac.
javac="$java_home/bin/javac"
[ -x "$javac" ] || javac="$(command -v javac || true)"
if [ -n "$javac" ]; then
  relocate "$tmp/hc.jar" org.apache.hc /usr/share/java/httpclient5.jar /usr/share/java/httpcore5.jar \
    /usr/share/java/httpcore5-h2.jar
  stub="$tmp/stub/org/apache/iceberg/shaded/org/apache/hc/client5/http/ssl"
  mkdir -p "$stub" "$tmp/stub-classes"
  cat >"$stub/TlsSocketStrategy.java" <<'JAVA'
package org.apache.iceberg.shaded.org.apache.hc.client5.http.ssl;

/** Stand-in for httpclient5 5.4's TlsSocketStrategy, which 5.2.1 lacks (lethe spark-env.sh). */
public interface TlsSocketStrategy {
  javax.net.ssl.SSLSocket upgrade(
      java.net.Socket socket,
      String target,
      int port,
      Object attachment,
      org.apache.iceberg.shaded.org.apache.hc.core5.http.protocol.HttpContext context)
      throws java.io.IOException;
}
JAVA
  "$javac" --release 8 -nowarn -Xlint:-options -cp "$tmp/hc.jar" -d "$tmp/stub-classes" \
    "$stub/TlsSocketStrategy.java" >&2
  "$py" - "$tmp/hc.jar" "$tmp/stub-classes" "$jars/iceberg-shaded-httpclient5.jar" <<'PY'
import os, shutil, sys, zipfile
src, classes, out = sys.argv[1:]
shutil.copy(src, out)
with zipfile.ZipFile(out, "a", zipfile.ZIP_DEFLATED) as z:
    for root, _, files in os.walk(classes):
        for f in files:
            p = os.path.join(root, f)
            z.write(p, os.path.relpath(p, classes))
PY
else
  log "no javac: the REST catalog client is not set up (LETHE_SPARK_REST=0)"
fi

# 4. S3 through Hadoop's s3a: hadoop-aws 3.3.1 + AWS SDK v1 bundle, shipped by PyPI's
#    sagemaker-pyspark 1.4.5 (an sdist of 181 MB; only the two jars are kept). Works with
#    pyspark's Hadoop 3.3.4 client. LETHE_SPARK_S3=0 skips it.
if [ "${LETHE_SPARK_S3:-1}" != 0 ]; then
  "$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$tmp/s3" "$S3_PKG==$S3_PKG_VERSION" >&2
  extract "$(ls "$tmp"/s3/*)" "$HADOOP_AWS_JAR" "$AWS_BUNDLE_JAR"
fi

echo "$want_stamp" >"$stamp"
log "ready"
emit
