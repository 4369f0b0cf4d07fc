#!/usr/bin/env bash
# Reproduces the figures in BENCHMARKS.md, each measured side by side in one run.
#   bash scripts/bench.sh [OUT_DIR]
# Uses the release binary (cargo build --release -p lethe-cli) and the PyIceberg venv.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/lethe-bench}"
rm -rf "$out"; mkdir -p "$out"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -p lethe-cli >&2
lethe="$(realpath "$target/release/lethe")"
py="$(bash scripts/python-env.sh)"
timed() { # timed NAME CMD... : runs CMD under /usr/bin/time -v, prints "NAME seconds peak_kB"
  local name="$1"; shift
  /usr/bin/time -v -o "$out/$name.time" "$@" > "$out/$name.out"
  local s kb
  s=$(grep "Elapsed (wall clock)" "$out/$name.time" | awk '{print $NF}')
  kb=$(grep "Maximum resident" "$out/$name.time" | awk '{print $NF}')
  echo "$name wall=$s peak_rss_kB=$kb"
}

echo "== demo init at scale 1 and 10"
timed demo-init-1 "$lethe" demo init --dir "$out/demo1" --scale 1
timed demo-init-10 "$lethe" demo init --dir "$out/demo10" --scale 10

echo "== delete one learner: lethe vs PyIceberg Table.delete, events sorted by learner_id"
for rows in 100000 1000000 10000000; do
  for who in lethe py; do
    (cd "$out/demo1" && "$lethe" bench events --table "bench.ev_${who}_${rows}" --rows "$rows" --file-rows 100000 > /dev/null)
  done
  l=$(cd "$out/demo1" && "$lethe" bench delete --table "bench.ev_lethe_${rows}" --learner 3590)
  p=$("$py" scripts/bench_delete.py "$out/demo1/catalog.db" "$out/demo1/warehouse" "bench.ev_py_${rows}" 3590)
  echo "rows=$rows lethe=$l pyiceberg=$p"
done

echo "== planning on 100,000 datasets and 1,000,000 column edges"
timed plan "$lethe" bench plan --datasets 100000 --edges 1000000
cat "$out/plan.out"

echo "== proof scan at scale 10: throughput against cat, 1 vs 1,000 subjects"
files=$(find "$out/demo10/warehouse" -type f | wc -l)
bytes=$(find "$out/demo10/warehouse" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
find "$out/demo10/warehouse" -type f -exec cat {} + > /dev/null   # warm the cache
start=$(date +%s.%N); find "$out/demo10/warehouse" -type f -exec cat {} + > /dev/null; end=$(date +%s.%N)
echo "cat: files=$files bytes=$bytes seconds=$(echo "$end - $start" | bc)"
(cd "$out/demo10" && timed scan "$lethe" bench scan --subjects 1000 && cat "$out/scan.out")

echo "== erase: one learner, 1,000 in one batch, 20 single runs (scale 1 and 10)"
for scale in 1 10; do
  d="$out/erase$scale"
  for v in one batch singles; do "$lethe" demo init --dir "$d-$v" --scale "$scale" > /dev/null 2>&1; done
  (cd "$d-one" && timed "erase-one-$scale" "$lethe" erase --subject learner=3590 --request e-1 --min-age 0 --json)
  seq 1 1000 | awk '{printf "req-%04d learner=%d\n", $1, $1 * 5}' > "$out/batch.txt"
  (cd "$d-batch" && timed "erase-batch-$scale" "$lethe" erase --subjects-file "$out/batch.txt" --min-age 0 --json)
  start=$(date +%s.%N)
  for i in $(seq 1 20); do (cd "$d-singles" && "$lethe" erase --subject "learner=$((i * 5))" --request "s-$i" --min-age 0 --json > /dev/null); done
  end=$(date +%s.%N)
  echo "20 single runs at scale $scale: seconds=$(echo "$end - $start" | bc)"
done
