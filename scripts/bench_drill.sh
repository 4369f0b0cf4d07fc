#!/usr/bin/env bash
# Issue 16's benchmark: `lethe drill` on the demo with every store (SQLite application database,
# export, helpdesk vendor API, search index, Git evaluation set), three runs per scale; prints
# the time per system (seed, pipeline, erase step) and the peak memory of each run.
#   LETHE=path/to/lethe bash scripts/bench_drill.sh [OUT_DIR] [SCALES...]
set -euo pipefail
cd "$(dirname "$0")/.."
lethe="$(realpath "${LETHE:-${CARGO_TARGET_DIR:-target}/release/lethe}")"
out="$(realpath -m "${1:-$(mktemp -d)}")"
shift || true
scales=("${@:-1}")
mkdir -p "$out"
for s in "${scales[@]}"; do
  d="$out/demo-$s"
  "$lethe" demo init --dir "$d" --scale "$s" --force --json >/dev/null
  (cd "$d" && exec "$lethe" demo vendor >"$out/vendor-$s.log" 2>&1) &
  vendor=$!
  trap 'kill "$vendor" 2>/dev/null || true' EXIT
  sleep 1
  for run in 1 2 3; do
    (cd "$d" && /usr/bin/time -v "$lethe" drill --min-age 0s --json \
      >"$out/drill-$s-$run.json" 2>"$out/drill-$s-$run.time")
    python3 - "$out/drill-$s-$run.json" "$out/drill-$s-$run.time" "$s" "$run" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
peak = [l.split(":")[1].strip() for l in open(sys.argv[2]) if "Maximum resident" in l][0]
print(f"scale {sys.argv[3]} run {sys.argv[4]}: {r['seconds']:.2f} s, peak {int(peak)//1024} MB, failures {len(r['failures'])}")
for t in r["times"]:
    print(f"  {t['system']:32} seed {t['seed_seconds']*1000:7.0f} ms  pipeline {t['pipeline_seconds']*1000:7.0f} ms  erase {t['erase_seconds']*1000:7.0f} ms")
PY
  done
  kill "$vendor" 2>/dev/null || true
  wait "$vendor" 2>/dev/null || true
  trap - EXIT
done
