#!/usr/bin/env bash
# Issue 15's benchmark: the time per system (application database, warehouse, export, vendor
# API, search index, Git evaluation set) of one request and of a batch of 1,000 requests through
# every store of the demo, each store's delete and probe batched where its API allows.
#   LETHE=path/to/lethe bash scripts/bench_stores.sh [OUT_DIR]
# Prints one JSON object per run (see `lethe bench stores --help`) and the peak memory.
set -euo pipefail
cd "$(dirname "$0")/.."
lethe="${LETHE:-${CARGO_TARGET_DIR:-target}/release/lethe}"
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
for n in 1 1000; do
  "$lethe" demo init --dir "$out/demo-$n" --force --json >/dev/null
  (cd "$out/demo-$n" && /usr/bin/time -v "$lethe" bench stores --requests "$n" \
    >"$out/stores-$n.json" 2>"$out/stores-$n.time")
  cat "$out/stores-$n.json"
  grep "Maximum resident" "$out/stores-$n.time"
done
