#!/usr/bin/env bash
# Issue 49's batch benchmark: a week's batch of erasures, lethe against Spark 3.5 + Iceberg 1.10
# on the same cores, and lethe against the physical floor.
#   bash scripts/bench_batch.sh [OUT_DIR] [SCALE] [NS]
# defaults: /tmp/lethe-bench-batch, 100, "1 100 4000". LETHE_BENCH_ROUNDS (default 2) rounds,
# LETHE_BENCH_SEED (default: random, printed) picks the learners, LETHE_BENCH_REUSE=1 reuses
# the demos an earlier run at the same scale left in OUT_DIR, LETHE_BIN a built lethe
# (default: a release build), LETHE_SPARK_DRIVER_MEMORY Spark's driver heap (default 4g).
#
# Two demos made by the same `lethe demo init --warehouse-only --scale SCALE` (identical data; a
# `cp` to another path would not do, the catalog holds absolute paths), each kept pristine and
# restored at its own path before every run. For each N, N learners chosen at random with the
# printed seed (the same on both sides); one subjects file per N.
#   - lethe: `lethe erase --subjects-file F --min-age 0 --json` (plan, rewrite, expiry, manifest
#     rewrite, sweep, the logical check), the whole process;
#   - Spark: scripts/bench_batch_spark.py, `local[2]`, the JDBC catalog on the copy's SQLite
#     file: DELETE / UPDATE per table with the batch's selections (from lethe's dry run on the
#     other copy, made before the timing), then expire_snapshots, rewrite_manifests and
#     remove_orphan_files — the whole process (JVM start included) and its in-job time;
#   - after each pair, both warehouses read with PyIceberg and compared table by table by row
#     hash (scripts/bench_batch_compare.py): a difference fails the benchmark, as does a run
#     that fails or an erasure that doesn't finish;
#   - the floor: `lethe bench floor --subjects-file F` on a restored copy: reading and writing
#     exactly the files the batch's steps rewrite, with lethe's reader and writer.
# Rounds are interleaved (every N, lethe then Spark, then the next round). Peak memory is the
# process tree's (scripts/peak_rss.py: lethe is one process; Spark is Python plus its JVM).
# Results: $OUT_DIR/results.jsonl (one line per run) and a table on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-/tmp/lethe-bench-batch}")"
scale="${2:-100}"
ns="${3:-1 100 4000}"
rounds="${LETHE_BENCH_ROUNDS:-2}"
seed="${LETHE_BENCH_SEED:-$RANDOM}"
fail() { echo "bench_batch.sh: $*" >&2; exit 1; }
if [ -n "${LETHE_BIN:-}" ]; then
  lethe="$(realpath "$LETHE_BIN")"
else
  cargo build --release -p lethe-cli >&2
  lethe="$(realpath "${CARGO_TARGET_DIR:-target}/release/lethe")"
fi
py="$(bash scripts/python-env.sh)"
"$py" -c "import polars" 2>/dev/null || "$py" -m pip install --quiet --disable-pip-version-check "polars==2.2.0" >&2
eval "$(bash scripts/spark-env.sh | sed 's/^/export /')"
export JAVA_HOME="$LETHE_SPARK_JAVA_HOME"
scripts="$(pwd)/scripts"
echo "seed $seed, scale $scale, N = $ns, $rounds round(s), lethe $lethe" | tee "$out.params" >&2

if [ "${LETHE_BENCH_REUSE:-0}" = 1 ] && [ -f "$out/scale-$scale" ]; then
  # The pristine demos of an earlier run at this scale, at the same paths (the catalog holds
  # them); everything else is made again.
  find "$out" -mindepth 1 -maxdepth 1 ! -name '*.pristine' ! -name "scale-$scale" -exec rm -rf {} +
else
  rm -rf "$out"; mkdir -p "$out"
  for side in lethe spark; do
    (cd "$out" && "$lethe" demo init --dir "$side" --scale "$scale" --warehouse-only > "$side-init.out")
    mv "$out/$side" "$out/$side.pristine"
  done
  touch "$out/scale-$scale"
fi
mv "$out.params" "$out/params.txt"
du -sh "$out/lethe.pristine/warehouse" | tee -a "$out/params.txt" >&2
# restore SIDE: the pristine copy back at its path. The used copy is moved aside, not deleted:
# on an ext4 without a journal (this machine's) every inode deleted in the last minute is
# skipped, slowly, by each new file's inode allocation, so an `rm -rf` just before a run made
# each file it creates cost ~0.5 ms instead of ~25 µs. The copies moved aside are deleted at
# the end.
mkdir -p "$out/used"
restore() {
  [ -e "$out/$1" ] && mv "$out/$1" "$(mktemp -d "$out/used/$1.XXXXXX")/"
  cp -a "$out/$1.pristine" "$out/$1"
  sync
}
trap 'rm -rf "$out/used"' EXIT

# N learners per N, from the demo's learners, with the seed.
restore lethe
"$py" - "$out/lethe" > "$out/learners.txt" <<'EOF'
import sys
from pyiceberg.catalog.sql import SqlCatalog
d = sys.argv[1]
c = SqlCatalog("lethe", uri=f"sqlite:///{d}/catalog.db", warehouse=f"file://{d}/warehouse")
t = c.load_table("crm.learners").scan(selected_fields=("learner_id",)).to_arrow()
print("\n".join(str(v) for v in sorted(t.column("learner_id").to_pylist())))
EOF
for n in $ns; do
  "$py" - "$seed" "$n" "$out/subjects-$n.txt" "$out/learners.txt" <<'EOF'
import random, sys
seed, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ids = open(sys.argv[4]).read().split()
chosen = random.Random(seed).sample(ids, n)
with open(path, "w") as f:
    for i, learner in enumerate(chosen):
        f.write(f"batch-{n}-{i:05d} learner={learner}\n")
EOF
  (cd "$out/lethe" && "$lethe" erase --subjects-file "$out/subjects-$n.txt" --dry-run --json > "$out/dry-$n.json") \
    || fail "the dry run of N=$n failed"
done

# run NAME SIDE CMD...: CMD in $out/SIDE under peak_rss.py (and /usr/bin/time -v); appends a
# result line. Fails the benchmark when CMD fails.
run() {
  local name="$1" side="$2"; shift 2
  (cd "$out/$side" && "$py" "$scripts/peak_rss.py" "$out/$name.peak" \
      /usr/bin/time -v -o "$out/$name.time" "$@" > "$out/$name.out" 2> "$out/$name.err") \
    || { tail -n 30 "$out/$name.err" >&2; fail "$name failed"; }
}

for round in $(seq 1 "$rounds"); do
  for n in $ns; do
    restore lethe
    run "lethe-$n-r$round" lethe "$lethe" erase --subjects-file "$out/subjects-$n.txt" --min-age 0 --json
    restore spark
    run "spark-$n-r$round" spark "$LETHE_SPARK_PYTHON" "$scripts/bench_batch_spark.py" "$out/spark/catalog.db" "$out/spark/warehouse" "$out/dry-$n.json"
    "$py" "$scripts/bench_batch_compare.py" "$out/lethe/catalog.db" "$out/lethe/warehouse" \
      "$out/spark/catalog.db" "$out/spark/warehouse" "$out/dry-$n.json" > "$out/compare-$n-r$round.json" \
      || { rc=$?; cat "$out/compare-$n-r$round.json" >&2
           [ "$rc" = 3 ] && fail "N=$n round $round: lethe's and Spark's tables differ"
           fail "N=$n round $round: the comparison failed (exit $rc)"; }
    restore lethe
    run "floor-$n-r$round" lethe "$lethe" bench floor --subjects-file "$out/subjects-$n.txt"
    "$py" - "$out" "$n" "$round" >> "$out/results.jsonl" <<'EOF'
import json, sys
out, n, r = sys.argv[1], sys.argv[2], sys.argv[3]
def peak(name):
    p = json.load(open(f"{out}/{name}.peak"))
    kb = 0
    for line in open(f"{out}/{name}.time"):
        if "Maximum resident" in line:
            kb = int(line.split()[-1])
    return p["wall_seconds"], max(kb, p["peak_rss_kb"])
lw, lk = peak(f"lethe-{n}-r{r}")
sw, sk = peak(f"spark-{n}-r{r}")
fw, fk = peak(f"floor-{n}-r{r}")
rep = json.load(open(f"{out}/lethe-{n}-r{r}.out"))
j = rep["journal"]
if not j.get("finished_at") or len(j["requests"]) != int(n):
    sys.exit(f"lethe N={n} round {r}: the erasure did not finish for every request")
spark = json.loads(open(f"{out}/spark-{n}-r{r}.out").read().strip().splitlines()[-1])
floor = json.loads(open(f"{out}/floor-{n}-r{r}.out").read())
cmp = json.load(open(f"{out}/compare-{n}-r{r}.json"))
print(json.dumps({
    "n": int(n), "round": int(r),
    "lethe_wall": lw, "lethe_in_process": rep["seconds"], "lethe_peak_kb": lk,
    "rows_erased": sum(s["rows"] for s in j["steps"]),
    "spark_wall": sw, "spark_startup": spark["startup_seconds"], "spark_in_job": spark["in_job_seconds"],
    "spark_statements": spark["statements_seconds"], "spark_procedures": spark["procedures_seconds"],
    "spark_peak_kb": sk,
    "floor_seconds": floor["seconds"], "floor_files": floor["files"], "floor_rows": floor["rows"],
    "floor_bytes_written": floor["bytes_written"], "floor_wall": fw,
    "tables_compared": cmp["compared"],
}))
EOF
    tail -n 1 "$out/results.jsonl" >&2
  done
done

"$py" - "$out/results.jsonl" "$scale" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"scale {sys.argv[2]}: best of {max(r['round'] for r in rows)} round(s)")
print("| N | lethe wall | lethe in-process | Spark wall | Spark in-job | Spark / lethe (wall) | Spark in-job / lethe in-process | floor | lethe in-process / floor | peak RSS lethe / Spark |")
print("|---|---|---|---|---|---|---|---|---|---|")
for n in sorted({r["n"] for r in rows}):
    rs = [r for r in rows if r["n"] == n]
    lw = min(r["lethe_wall"] for r in rs); li = min(r["lethe_in_process"] for r in rs)
    sw = min(r["spark_wall"] for r in rs); sj = min(r["spark_in_job"] for r in rs)
    fl = min(r["floor_seconds"] for r in rs)
    lk = max(r["lethe_peak_kb"] for r in rs); sk = max(r["spark_peak_kb"] for r in rs)
    print(f"| {n:,} | {lw:.2f} s | {li:.2f} s | {sw:.1f} s | {sj:.1f} s | {sw/lw:.1f}x | {sj/li:.1f}x "
          f"| {fl:.2f} s ({rs[0]['floor_files']} files) | {li/fl:.2f}x | {lk/1024:.0f} / {sk/1024:.0f} MB |")
EOF
