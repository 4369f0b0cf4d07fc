#!/usr/bin/env bash
# Issue 48's figure: the proof scan on ORC data files against `cat`, beside the same rows as
# Parquet, in one run:
#   bash scripts/bench_orc.sh [OUT_DIR] [SCALE]     (defaults /tmp/lethe-bench-orc, 10)
# A demo at SCALE (release `lethe demo init`); every Parquet data file of its warehouse copied
# to OUT_DIR/parquet and rewritten as ORC (pyarrow.orc, zstd) to OUT_DIR/orc
# (scripts/bench_orc_convert.py). For each folder: `cat` of every file, best of 5; then
# lethe-scan's scan_bench example (1 subject, then 1,000) under /usr/bin/time -v, three runs.
# Builds the example in release (CARGO_TARGET_DIR to reuse a build) and the lethe binary unless
# LETHE_BIN names one (it only makes the demo).
# The benchmark fails when a file is unreadable, or when the ORC files holding subject 0 are not
# as many as the Parquet files holding it (the same rows: both readers must find the same files).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/lethe-bench-orc}"
scale="${2:-10}"
rm -rf "$out"; mkdir -p "$out"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -p lethe-scan --example scan_bench >&2
bench="$(realpath "$target/release/examples/scan_bench")"
if [ -n "${LETHE_BIN:-}" ]; then
  lethe="$(realpath "$LETHE_BIN")"
else
  cargo build --release -p lethe-cli >&2
  lethe="$(realpath "$target/release/lethe")"
fi
py="$(bash scripts/python-env.sh)"
"$lethe" demo init --dir "$out/demo" --scale "$scale" > /dev/null
"$py" scripts/bench_orc_convert.py "$out/demo/warehouse" "$out/files"
best_cat() {
  local best=""
  for _ in 1 2 3 4 5; do
    local t0 t1
    t0=$(date +%s.%N); find "$1" -type f -exec cat {} + > /dev/null; t1=$(date +%s.%N)
    local t; t=$(echo "$t1 - $t0" | bc)
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc)" = 1 ]; then best=$t; fi
  done
  echo "$best"
}
declare -A holding
for kind in parquet orc; do
  dir="$out/files/$kind"
  bytes=$(du -sb "$dir" | cut -f1)
  echo "$kind: $(find "$dir" -type f | wc -l) files, $bytes bytes, cat best of 5 (2 warming): $(best_cat "$dir") s"
  for run in 1 2 3; do
    /usr/bin/time -v -o "$out/$kind-$run.time" "$bench" "$dir" 1000 > "$out/$kind-$run.txt"
    if grep -q "^unreadable:" "$out/$kind-$run.txt"; then
      echo "unreadable files in $kind:" >&2; grep "^unreadable:" "$out/$kind-$run.txt" >&2; exit 1
    fi
    one=$(grep "^one subject:" "$out/$kind-$run.txt")
    all=$(grep "^all subjects:" "$out/$kind-$run.txt")
    kb=$(grep "Maximum resident" "$out/$kind-$run.time" | awk '{print $NF}')
    echo "  run $run: ${one#one subject: } | 1,000: $(echo "$all" | sed 's/.*seconds \([0-9.]*\).*/\1/') s | $(grep '^cost ratio' "$out/$kind-$run.txt" | cut -d' ' -f3) | peak RSS ${kb} kB"
    holding[$kind]=$(echo "$one" | sed 's/.*holding \([0-9]*\).*/\1/')
  done
done
if [ "${holding[parquet]}" != "${holding[orc]}" ] || [ "${holding[orc]}" = 0 ]; then
  echo "the ORC scan found subject 0 in ${holding[orc]} files, the Parquet scan in ${holding[parquet]}" >&2
  exit 1
fi
echo "subject 0 found in ${holding[orc]} files of each format"
