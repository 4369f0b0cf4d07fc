#!/usr/bin/env bash
# An erasure's RECOMPUTE step before/after (BENCHMARKS.md section 24), side by side in one run:
#   LETHE_BEFORE=/path/to/old/lethe LETHE_AFTER=/path/to/new/lethe \
#     bash scripts/bench_recompute.sh OUT_DIR "SCALES" [ROUNDS]
# For each scale one `demo init --warehouse-only` (by LETHE_AFTER) kept pristine; each round
# erases learner 3590 with `lethe -v erase --json` under /usr/bin/time -v, before then after,
# each on a fresh `cp -a` of the pristine demo restored at the same path (the catalog holds
# absolute paths), after `sync`. Prints whole-process wall and peak RSS, the RECOMPUTE steps'
# seconds (from the journal's started_at/finished_at) and how they ran, the load average;
# then whether analytics.course_performance is identical after either binary (read back
# with PyIceberg 0.12, sorted by course_id).
set -euo pipefail
cd "$(dirname "$0")/.."
out="$1"; scales="$2"; rounds="${3:-3}"
before="$LETHE_BEFORE"; after="$LETHE_AFTER"
py="$(bash scripts/python-env.sh)"
mkdir -p "$out"
for scale in $scales; do
  d="$out/d$scale"
  rm -rf "$d" "$d.pristine"
  "$after" demo init --dir "$d" --scale "$scale" --warehouse-only > /dev/null 2>&1
  cp -a "$d" "$d.pristine"
  echo "== scale $scale disk=$(du -sh "$d" | cut -f1)"
  for round in $(seq "$rounds"); do
    for side in before after; do
      rm -rf "$d"; cp -a "$d.pristine" "$d"; sync
      bin=$before; [ $side = after ] && bin=$after
      name="$side-$scale-$round"
      (cd "$d" && /usr/bin/time -v -o "$out/$name.time" "$bin" -v erase --subject learner=3590 --request e-1 --min-age 0 --json > "$out/$name.json" 2> "$out/$name.log") || echo "FAILED $name"
      wall=$(grep "Elapsed (wall clock)" "$out/$name.time" | awk '{print $NF}')
      kb=$(grep "Maximum resident" "$out/$name.time" | awk '{print $NF}')
      "$py" - "$out/$name.json" "$name" "$wall" "$kb" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys, datetime
j = json.load(open(sys.argv[1]))["journal"]
f = lambda s: datetime.datetime.fromisoformat(s)
st = [s for s in j["steps"] if s["action"] == "RECOMPUTE"]
rec = " ".join(f"{s['table']}={(f(s['finished_at'])-f(s['started_at'])).total_seconds():.3f}s({(s.get('recompute') or {}).get('mode','-')})" for s in st)
print(f"{sys.argv[2]} wall={sys.argv[3]} rss_kB={sys.argv[4]} recompute: {rec} load={sys.argv[5]}")
PY
      if [ "$round" = 1 ]; then
        "$py" - "$d" > "$out/$side-$scale.rows" <<'PY'
import sys, json
from pyiceberg.catalog.sql import SqlCatalog
d = sys.argv[1]
c = SqlCatalog("lethe", uri=f"sqlite:///{d}/catalog.db", warehouse=f"file://{d}/warehouse")
t = c.load_table("analytics.course_performance").scan().to_arrow().sort_by("course_id").to_pylist()
print(json.dumps(t, default=str))
PY
      fi
    done
  done
  if cmp -s "$out/before-$scale.rows" "$out/after-$scale.rows"; then echo "course_performance identical before/after (PyIceberg, $(wc -c < "$out/after-$scale.rows") bytes)"; else echo "course_performance DIFFERS before/after"; fi
  rm -rf "$d" "$d.pristine"
done
