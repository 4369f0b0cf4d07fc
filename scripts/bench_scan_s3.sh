#!/usr/bin/env bash
# Issue 49's object-storage figure: the proof scan on SeaweedFS against a plain parallel GET of
# every object with the same concurrency (the store's raw read speed), with one subject's
# traces and with 4,000 subjects' traces, locally and on a Ballista cluster of two executors.
#   LETHE_BIN=path/to/lethe bash scripts/bench_scan_s3.sh [OUT_FILE] [SCALE]
# defaults: stdout, 100; LETHE_BENCH_ROUNDS (default 3) rounds, interleaved.
# It starts its own SeaweedFS + PostgreSQL (scripts/services.sh) on 127.0.0.1 free ports in a
# temporary folder, builds the demo there (`lethe demo init --warehouse-only`, PostgreSQL
# catalog, warehouse on S3), and stops everything at the end.
#
# Per round, one after the other on the same demo:
#   get     `lethe bench get --prefix <warehouse>`: list, then GET every object whole, as many
#           in flight as the machine has cores (the scan's workers); no parsing;
#   scan-1  `lethe scan --subject learner=3590 --json` (exit 1: the learner is there);
#   scan-4k `lethe scan --subjects-file batch.txt --json`: 4,000 learners' traces (prepared from
#           the plan, as an erasure's case files are, before the scan starts);
# and after the local rounds, the same two scans with `--engine ballista` on a cluster of two
# executors (scripts/ballista.sh). Throughput is the bytes each read over its own seconds (the
# scan's `seconds`, its listing included; the GET's seconds without its listing, which is
# reported apart). A scan that errors (exit > 1) fails the benchmark, as does a scan that
# reads fewer objects than the GET lists under the warehouse.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out=${1:-/dev/stdout}
scale=${2:-100}
rounds=${LETHE_BENCH_ROUNDS:-3}
lethe=${LETHE_BIN:?set LETHE_BIN to a release build of lethe}
lethe=$(realpath "$lethe")
py="$(bash "$here/python-env.sh")"
state=$(mktemp -d "${TMPDIR:-/tmp}/lethe-bench-scan-s3.XXXXXX")
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
wh="s3://$LETHE_S3_BUCKET/bench-scan-$scale"
demo="$state/demo"
(cd "$state" && "$lethe" demo init --dir demo --warehouse-only --scale "$scale" \
  --catalog postgres --catalog-uri "$pg" --catalog-name "scan$scale" \
  --warehouse "$wh" --s3-path-style true >/dev/null 2>"$state/init.err") ||
  { tail -n 20 "$state/init.err" >&2; exit 1; }

# 4,000 learners (1 + k * step), one per line as `lethe erase --subjects-file` takes them.
learners=$((5000 * scale))
"$py" - "$learners" >"$state/batch.txt" <<'EOF'
import sys
step = int(sys.argv[1]) // 4000
for i in range(4000):
    print(f"scan-{i:04d} learner={1 + i * step}")
EOF

# run NAME CMD...: CMD in the demo under /usr/bin/time -v; exit 0 or 1 (a scan that finds the
# subject) is success; prints nothing, the JSON is in $state/NAME.out.
run() {
  local name=$1; shift
  (cd "$demo" && /usr/bin/time -v -o "$state/$name.time" "$@" >"$state/$name.out" 2>"$state/$name.err") || {
    local rc=$?
    if [ "$rc" != 1 ]; then tail -n 30 "$state/$name.err" >&2; exit "$rc"; fi
  }
}

for round in $(seq 1 "$rounds"); do
  run "get-r$round" "$lethe" bench get --prefix "$wh"
  run "scan1-r$round" "$lethe" scan --subject learner=3590 --json
  run "scan4k-r$round" "$lethe" scan --subjects-file "$state/batch.txt" --json
  echo "round $round done" >&2
done
LETHE_BIN=$lethe LETHE_EXECUTOR_TASKS=2 LETHE_SERVICES_OWNER_PID=$$ \
  bash "$here/ballista.sh" start "$state/cluster" 2 >&2
# The scheduler's address and the cluster's secret file (ballista.env).
set -a
# shellcheck disable=SC1091
. "$state/cluster/ballista.env"
set +a
sched=$LETHE_BALLISTA_SCHEDULER
for round in $(seq 1 "$rounds"); do
  run "bscan1-r$round" "$lethe" scan --subject learner=3590 --json --engine ballista --scheduler "$sched"
  run "bscan4k-r$round" "$lethe" scan --subjects-file "$state/batch.txt" --json --engine ballista --scheduler "$sched"
done

"$py" - "$state" "$rounds" "$scale" >"$state/table.md" <<'EOF'
import json, sys
state, rounds, scale = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(name):
    out = open(f"{state}/{name}.out").read()
    j = json.loads(out[out.index("{"):])
    rss = 0
    for line in open(f"{state}/{name}.time"):
        if "Maximum resident" in line:
            rss = int(line.split()[-1]) // 1024
    return j, rss
def best(prefix):
    runs = [load(f"{prefix}-r{r}") for r in range(1, rounds + 1)]
    return min(runs, key=lambda x: x[0]["seconds"])
g, grss = best("get")
mbps = lambda b, s: b / 1e6 / s
gm = mbps(g["bytes"], g["seconds"])
print(f"Scale {scale}: {g['objects']:,} objects, {g['bytes']/1e6:.1f} MB under the warehouse; best of {rounds}.")
print()
print("| read | objects | MB | seconds | MB/s | / GET | peak RSS |")
print("|---|---|---|---|---|---|---|")
print(f"| plain parallel GET ({g['concurrency']} in flight; listing {g['listing_seconds']:.2f} s apart) | {g['objects']:,} | {g['bytes']/1e6:.1f} | {g['seconds']:.2f} | {gm:.0f} | 1 | {grss} MB |")
rows = {}
for name, label in [("scan1", "lethe scan, 1 subject"), ("scan4k", "lethe scan, 4,000 subjects"),
                    ("bscan1", "Ballista, 2 executors, 1 subject"), ("bscan4k", "Ballista, 2 executors, 4,000 subjects")]:
    s, rss = best(name)
    files, b, sec = s.get("files_read", 0), s.get("bytes_read", 0), s["seconds"]
    if files < g["objects"]:
        sys.exit(f"{label}: read {files} objects, the GET listed {g['objects']}")
    rows[name] = sec
    print(f"| {label} | {files:,} | {b/1e6:.1f} | {sec:.2f} | {mbps(b, sec):.0f} | {mbps(b, sec)/gm:.2f} | {rss} MB |")
print()
print(f"4,000 subjects / 1 subject: local {rows['scan4k']/rows['scan1']:.2f}x, Ballista {rows['bscan4k']/rows['bscan1']:.2f}x (seconds).")
EOF
cat "$state/table.md" >"$out"
