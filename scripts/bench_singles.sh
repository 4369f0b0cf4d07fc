#!/usr/bin/env bash
# 1,000 single erasures, one after another on one fresh demo: the baseline the batch erase
# (BENCHMARKS.md section 5) is compared with. Usage: bash scripts/bench_singles.sh SCALE [OUT_DIR]
# Set LETHE to a release binary (default: target/release/lethe under CARGO_TARGET_DIR or ./target).
set -euo pipefail
scale="${1:?usage: bench_singles.sh SCALE [OUT_DIR]}"
out="${2:-/tmp/lethe-singles-$scale}"
lethe="${LETHE:-${CARGO_TARGET_DIR:-target}/release/lethe}"
rm -rf "$out" && mkdir -p "$out"
"$lethe" demo init --dir "$out/demo" --scale "$scale" > /dev/null
cd "$out/demo"
start=$(date +%s.%N)
for i in $(seq 1 1000); do
  "$lethe" erase --subject "learner=$((i * 5))" --request "s-$i" --min-age 0 --json > /dev/null
  if (( i % 100 == 0 )); then echo "$i runs: $(echo "$(date +%s.%N) - $start" | bc) s"; fi
done
echo "1000 single runs at scale $scale: $(echo "$(date +%s.%N) - $start" | bc) s"
