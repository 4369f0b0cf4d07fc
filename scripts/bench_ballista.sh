#!/usr/bin/env bash
# Benchmark of issue 19 (BENCHMARKS.md sections 18 and 21): the proof scan and a 1,000-subject
# batch rewrite on the demo in SeaweedFS (PostgreSQL catalog over S3), with the local engine,
# one Ballista executor and two, at each scale of SCALES (default "10 100") — and the check
# that the engines agree: it fails unless every engine's scan reports the same hits and every
# engine's erase leaves the same rows, table by table.
#
# Usage: LETHE=path/to/lethe bash scripts/bench_ballista.sh [OUT_FILE]
#   (default LETHE: $CARGO_TARGET_DIR/debug/lethe, else target/debug/lethe; build it first)
# It starts its own SeaweedFS + PostgreSQL (scripts/services.sh) and clusters
# (scripts/ballista.sh) on 127.0.0.1 free ports in a temporary folder, and stops them at the end.
#
# Per scale: one demo per engine, identical (the demo's seed is fixed); then for each engine
# (local, 1 executor, 2 executors, each cluster started fresh so its peak memory is its own),
# on its own demo: `lethe scan --subject learner=3590` (read only), the same scan with one
# object per task (the scheduler's overhead per task is the difference over the extra tasks),
# and `lethe erase` of the same batch of 1,000 learners (ids 1 + k·step). Wall time and client
# peak RSS from /usr/bin/time -v; executors' peak RSS from /proc/PID/status VmHWM. The erase
# runs with -v, so its progress lines are timestamped: the phases (planning, the steps, the
# cleanup) are summed per engine from them. Then each engine's scan of one and the same demo
# (JSON, timing aside, hits sorted) must be equal, and so must every table's rows after the erase (read with
# PyIceberg 0.12, an independent reader: per table the row count and a SHA-256 of the rows
# sorted by every column).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out=${1:-/dev/stdout}
scales=${SCALES:-"10 100"}
target=${CARGO_TARGET_DIR:-$here/../target}
lethe=${LETHE:-$target/debug/lethe}
[ -x "$lethe" ] || { echo "no lethe binary at $lethe (cargo build -p lethe-cli first)" >&2; exit 1; }
lethe=$(cd "$(dirname "$lethe")" && pwd)/$(basename "$lethe")

export LETHE_PYTHON="${LETHE_PYTHON:-$(bash "$here/python-env.sh")}"
state=$(mktemp -d "${TMPDIR:-/tmp}/lethe-bench-ballista.XXXXXX")
cleanup() {
  bash "$here/ballista.sh" stop "$state/cluster" >/dev/null 2>&1 || true
  bash "$here/services.sh" stop "$state/services" >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
LETHE_SERVICES_OWNER_PID=$$ bash "$here/services.sh" start all "$state/services" >&2
set -a
# shellcheck disable=SC1091
. "$state/services/env"
set +a
export PGPASSWORD=$LETHE_PG_PASSWORD
pg="postgresql://$LETHE_PG_USER@$LETHE_PG_HOST:$LETHE_PG_PORT/$LETHE_PG_DATABASE"

# run NAME CMD...: runs CMD under /usr/bin/time -v in the demo folder; prints "wall rss_mb".
run() {
  local name=$1; shift
  (cd "$demo" && /usr/bin/time -v "$@" >"$state/$name.out" 2>"$state/$name.err") || {
    local rc=$?
    # scan exits 1 when the learner is found (HOLDING): that is the expected answer here.
    if [ "$rc" != 1 ]; then tail -n 30 "$state/$name.err" >&2; exit "$rc"; fi
  }
  python3 - "$state/$name.err" <<'EOF'
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", t)
wall = (int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3)))
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) / 1024
print(f"{wall:.2f} {rss:.0f}")
EOF
}

# The ballista line of a run's stderr for JOB (scan or rewrite TABLE): "tasks files MiB s".
jobline() {
  grep -E "^ballista: $2:" "$state/$1.err" | head -n 1 | sed -E 's/^ballista: [^:]*: //' || true
}

executor_rss() {
  local pids total=0 p kb
  pids=$(grep LETHE_BALLISTA_EXECUTOR_PIDS "$state/cluster/ballista.env" | sed -E 's/.*="?([^"]*)"?/\1/')
  for p in $pids; do
    kb=$(awk '/VmHWM/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
    [ "$kb" -gt "$total" ] && total=$kb
  done
  echo $((total / 1024))
}

# phases ERR: from an erase's -v log (timestamped lines): seconds from the first log line to
# the first step (DELETE/REWRITE/RECOMPUTE …: planning, resolving values), through the steps
# to the first cleanup line, and from there to the last line (expiry, manifests, sweep).
phases() {
  python3 - "$1" <<'EOF'
import re, sys, datetime
ts = []
for line in open(sys.argv[1], errors="replace"):
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z\s+\w+\s+(\S+): (.*)", line)
    if m:
        ts.append((datetime.datetime.fromisoformat(m.group(1)[:26]), m.group(2), m.group(3)))
prog = [(t, msg) for t, target, msg in ts if target == "lethe::progress"]
step = next((t for t, m in prog if re.match(r"(DELETE|REWRITE|RECOMPUTE|NULL|HAND-OFF|SKIP)\b", m)), None)
clean = next((t for t, m in prog if m.startswith("cleanup")), None)
if not (ts and step and clean):
    print("-")
else:
    s = lambda a, b: (b - a).total_seconds()
    print(f"{s(ts[0][0], step):.1f} s, {s(step, clean):.1f} s, {s(clean, ts[-1][0]):.1f} s")
EOF
}

# same SCALE: fails unless the three engines' scans report the same hits and their erases
# left the same rows in every table; prints what was compared.
same() {
  "$LETHE_PYTHON" - "$1" "$state" <<'EOF'
import hashlib, json, os, sys
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog.sql import SqlCatalog
scale, state = sys.argv[1], sys.argv[2]
engines = ["local", "1", "2"]
def scan(e):
    v = json.load(open(f"{state}/scanjson-{scale}-{e}.json"))
    v.pop("seconds", None)
    for k in ("hits", "unreadable"):
        if isinstance(v.get(k), list):
            v[k] = sorted(v[k], key=lambda h: json.dumps(h, sort_keys=True))
    return v
scans = {e: scan(e) for e in engines}
hits = len(scans["local"].get("hits", []))
bad = [e for e in engines if scans[e] != scans["local"]]
if bad:
    for k in scans["local"]:
        if any(scans[e].get(k) != scans["local"][k] for e in bad):
            print(f"differs: {k}", file=sys.stderr)
    sys.exit(f"scale {scale}: the scan of engine(s) {bad} differs from the local engine's")
def digests(e):
    cat = SqlCatalog(f"bench{scale}e{e}", uri=os.environ["LETHE_PG_SQLALCHEMY_URI"], **{
        "s3.endpoint": os.environ["LETHE_S3_ENDPOINT"],
        "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
        "s3.region": os.environ.get("AWS_REGION", "us-east-1"),
        "s3.force-virtual-addressing": "false",
    })
    out = {}
    for ns in cat.list_namespaces():
        for ident in cat.list_tables(ns):
            t = cat.load_table(ident).scan().to_arrow()
            try:
                t = t.take(pc.sort_indices(t, sort_keys=[(c, "ascending") for c in t.column_names]))
            except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
                pass  # a column that can't be sorted: compared in read order
            t = t.combine_chunks().replace_schema_metadata(None)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, t.schema) as w:
                w.write_table(t)
            out[".".join(ident)] = (t.num_rows, hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest())
            del t
    return out
tables = {e: digests(e) for e in engines}
for e in engines[1:]:
    if tables[e] != tables["local"]:
        diff = sorted(k for k in set(tables[e]) | set(tables["local"]) if tables[e].get(k) != tables["local"].get(k))
        sys.exit(f"scale {scale}: after the erase engine {e} left other rows than the local engine in {diff}")
rows = sum(n for n, _ in tables["local"].values())
print(f"Scale {scale}: the same scan report on every engine ({hits} hits) and, after the erase, "
      f"the same rows in all {len(tables['local'])} tables ({rows:,} rows; PyIceberg 0.12, SHA-256 of each table's sorted rows).")
EOF
}

{
echo "| scale | engine | scan wall, client RSS | scan job (tasks, files, MiB, MiB/task) | scan, 1 object per task | overhead per task | erase 1,000 wall, client RSS | erase phases: to the first step, steps, cleanup | rewrite jobs (tasks, MiB, time in jobs) | executor peak RSS |"
echo "|---|---|---|---|---|---|---|---|---|---|"
} >"$state/table.md"

for scale in $scales; do
  t0=$(date +%s.%N)
  for engine in local 1 2; do
    (cd "$state" && "$lethe" demo init --dir "demo$scale-$engine" --warehouse-only --scale "$scale" \
      --catalog postgres --catalog-uri "$pg" --catalog-name "bench${scale}e$engine" \
      --warehouse "s3://$LETHE_S3_BUCKET/bench-$scale-$engine" --s3-path-style true >/dev/null 2>"$state/init.err") ||
      { tail -n 20 "$state/init.err" >&2; exit 1; }
    cp "$state/demo$scale-$engine/lethe.toml" "$state/lethe.toml.$scale-$engine"
  done
  echo "scale $scale: 3 demos built in $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.0f}')" "$t0" "$(date +%s.%N)") s" >&2
  learners=$((5000 * scale))
  step=$((learners / 1000))
  python3 - "$step" >"$state/batch.txt" <<'EOF'
import sys
step = int(sys.argv[1])
for i in range(1000):
    print(f"erasure-{i:04d} learner={1 + i * step}")
EOF
  for engine in local 1 2; do
    demo=$state/demo$scale-$engine
    flags=()
    if [ "$engine" != local ]; then
      # Each cluster makes its own secret (not the previous cluster's, sourced below).
      unset LETHE_CLUSTER_SECRET_FILE
      LETHE_BIN=$lethe LETHE_EXECUTOR_LOG=info LETHE_EXECUTOR_TASKS=2 LETHE_SERVICES_OWNER_PID=$$ \
        bash "$here/ballista.sh" start "$state/cluster" "$engine" >&2
      # The scheduler's address and the cluster's secret file, which every client call needs.
      set -a
      # shellcheck disable=SC1091
      . "$state/cluster/ballista.env"
      set +a
      sched=$LETHE_BALLISTA_SCHEDULER
      flags=(--engine ballista --scheduler "$sched")
    fi
    # Scan tasks of at most 32 objects (the default, 256 objects or 64 MiB, makes one task of
    # a scale-10 warehouse).
    cp "$state/lethe.toml.$scale-$engine" "$demo/lethe.toml"
    printf '\n[engine]\ntask_objects = 32\n' >>"$demo/lethe.toml"
    read -r sw sr < <(run "scan-$scale-$engine" "$lethe" scan --subject learner=3590 "${flags[@]}")
    # For the comparison every engine scans the same demo, the last one's (not erased yet):
    # two builds of the demo differ in the derived tables' row order (the pipelines' parallel
    # aggregation), hence in the hits' row numbers.
    (cd "$state/demo$scale-2" && "$lethe" scan --subject learner=3590 --json "${flags[@]}" >"$state/scanjson-$scale-$engine.json" 2>/dev/null) || true
    cp "$state/lethe.toml.$scale-$engine" "$demo/lethe.toml"
    sjob=$(jobline "scan-$scale-$engine" scan)
    s1=- ; ov=-
    if [ "$engine" != local ]; then
      printf '\n[engine]\ntask_objects = 1\n' >>"$demo/lethe.toml"
      read -r s1w _ < <(run "scan1-$scale-$engine" "$lethe" scan --subject learner=3590 "${flags[@]}")
      cp "$state/lethe.toml.$scale-$engine" "$demo/lethe.toml"
      s1job=$(jobline "scan1-$scale-$engine" scan)
      t_many=$(echo "$s1job" | sed -E 's/^([0-9]+) tasks.*/\1/')
      t_few=$(echo "$sjob" | sed -E 's/^([0-9]+) tasks.*/\1/')
      ov=$(python3 -c "import sys; a,b,c,d=map(float,sys.argv[1:]); print(f'{(c-a)/max(d-b,1)*1000:.0f} ms' )" "$sw" "$t_few" "$s1w" "$t_many")
      s1="$s1w s ($t_many tasks)"
    fi
    read -r ew er < <(run "erase-$scale-$engine" "$lethe" -v erase --subjects-file "$state/batch.txt" --min-age 0 "${flags[@]}")
    phases=$(phases "$state/erase-$scale-$engine.err")
    rjobs=$({ grep -E "^ballista: rewrite" "$state/erase-$scale-$engine.err" || true; } |
      sed -E 's/^ballista: rewrite ([^:]*): ([0-9]+) tasks, [0-9]+ files, ([0-9.]+) MiB.*, ([0-9.]+) s$/\1 \2 \3 \4/' |
      awk '{t+=$2; m+=$3; s+=$4; n++} END {if (n) printf "%d jobs, %d tasks, %.1f MiB, %.2f s in jobs", n, t, m, s; else print "-"}')
    xr=-
    if [ "$engine" != local ]; then
      xr="$(executor_rss) MB"
      bash "$here/ballista.sh" stop "$state/cluster"
    fi
    name=$engine; [ "$engine" != local ] && name="$engine executor(s)"
    echo "| $scale | $name | $sw s, $sr MB | ${sjob:--} | $s1 | $ov | $ew s, $er MB | $phases | $rjobs | $xr |" >>"$state/table.md"
    echo "scale $scale $name done" >&2
  done
  same "$scale" >>"$state/same.md"
done
{
  cat "$state/table.md"
  echo
  cat "$state/same.md"
  echo
  echo "Every job the cluster ran (the client's \`ballista:\` lines):"
  echo
  for f in "$state"/scan-*.err "$state"/scan1-*.err "$state"/erase-*.err; do
    [ -f "$f" ] || continue
    grep -E "^ballista:" "$f" | sed "s|^|    $(basename "$f" .err): |" || true
  done
} >"$out"
[ "$out" = /dev/stdout ] || cat "$out"
