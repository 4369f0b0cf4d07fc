#!/usr/bin/env bash
# Issue 14's benchmark (BENCHMARKS.md, the issue 14 section), on a SeaweedFS the script starts and stops:
#   1. erase and scan of learner 3590 at scale $SCALE (default 10): the local folder (embedded
#      SQLite catalog) vs SeaweedFS (its Iceberg REST catalog + S3), side by side in one run,
#      wall time and peak RSS (/usr/bin/time -v);
#   2. the sweep's and the proof scan's peak RSS while listing a prefix holding $COUNTS (default
#      10,000 100,000 1,000,000) empty objects, added to learning.events' data/ folder of a
#      scale-1 demo in the REST catalog (`lethe bench objects` writes them, 64 at a time).
# Everything lives in one mktemp -d folder, removed at the end with the server's data.
#   usage: bash scripts/bench_production.sh [OUT_FILE]
#   (builds target/release/lethe, under CARGO_TARGET_DIR when set; LETHE=path/to/lethe uses that
#   binary instead; SCALE and COUNTS as above)
set -euo pipefail
cd "$(dirname "$0")/.."
services="$(pwd)/scripts/services.sh"
SCALE="${SCALE:-10}"
COUNTS="${COUNTS:-10000 100000 1000000}"
out="${1:-/dev/stdout}"
if [ -z "${LETHE:-}" ]; then
  cargo build --release -p lethe-cli >&2
  LETHE="${CARGO_TARGET_DIR:-target}/release/lethe"
fi
lethe="$(realpath "$LETHE")"
work="$(mktemp -d "${TMPDIR:-/tmp}/lethe-bench14.XXXXXX")"
state="$work/services"
mkdir -p "$state"
cleanup() { bash "$services" stop "$state" >&2 || true; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
LETHE_SERVICES_OWNER_PID=$$ bash "$services" start seaweedfs "$state" >&2
set -a
# shellcheck disable=SC1091
. "$state/env"
set +a

# measure NAME CMD...: runs CMD in the current folder, prints "NAME | wall s | peak RSS MB | exit".
measure() {
  local name="$1"
  shift
  local code=0
  /usr/bin/time -v -o "$work/time.txt" "$@" >"$work/cmd.out" 2>"$work/cmd.err" || code=$?
  local wall rss
  wall="$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt" |
    awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')"
  rss="$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$work/time.txt")"
  printf '| %s | %.2f s | %s MB | %s |\n' "$name" "$wall" "$rss" "$code"
  if [ "$code" -gt 1 ]; then
    tail -5 "$work/cmd.err" >&2
  fi
}

rest=(--catalog rest --catalog-uri "$LETHE_REST_URI" --warehouse s3://warehouse
  --s3-endpoint "$LETHE_S3_ENDPOINT" --s3-path-style true)
{
  echo "### erase and scan of learner 3590 at scale $SCALE"
  echo
  echo "| step | wall | peak RSS | exit |"
  echo "|---|---|---|---|"
  cd "$work"
  echo "building the local demo" >&2
  "$lethe" demo init --dir local --warehouse-only --scale "$SCALE" --json >/dev/null
  echo "building the REST demo" >&2
  "$lethe" demo init --dir rest --warehouse-only --scale "$SCALE" "${rest[@]}" --json >/dev/null
  for where in local rest; do
    cd "$work/$where"
    measure "$where: erase" "$lethe" erase --subject learner=3590 --request erasure-0001 --min-age 0
    measure "$where: scan" "$lethe" scan --request erasure-0001
    echo "$where scan: $(tail -1 "$work/cmd.out")" >&2
  done
  cd "$work"
  rm -rf "$work/local"
  echo
  echo "### the sweep and the proof scan listing a prefix of N empty objects"
  echo
  echo "| objects under learning/events/data/bulk/ | the added ones written in | sweep --dry-run: wall | sweep: peak RSS | scan: wall | scan: peak RSS |"
  echo "|---|---|---|---|---|---|"
  echo "rebuilding the REST demo at scale 1 for the listing" >&2
  "$lethe" demo init --dir listing --warehouse-only --scale 1 --force "${rest[@]}" --json >/dev/null
  cd "$work/listing"
  written=0
  for n in $COUNTS; do
    add=$((n - written))
    t0=$(date +%s.%N)
    "$lethe" bench objects --prefix "s3://warehouse/learning/events/data/bulk/n$n" --count "$add" >&2
    t1=$(date +%s.%N)
    written=$n
    sweep="$(measure sweep "$lethe" sweep learning.events --dry-run --min-age 0)"
    grep -q "unreferenced" "$work/cmd.out" || { echo "the sweep listed nothing" >&2; cat "$work/cmd.err" >&2; }
    scan="$(measure scan "$lethe" scan --subject learner=3590)"
    echo "scan over $n objects: $(tail -1 "$work/cmd.out")" >&2
    printf '| %s | %.0f s | %s | %s | %s | %s |\n' "$n" "$(echo "$t1 - $t0" | bc)" \
      "$(echo "$sweep" | cut -d'|' -f3)" "$(echo "$sweep" | cut -d'|' -f4)" \
      "$(echo "$scan" | cut -d'|' -f3)" "$(echo "$scan" | cut -d'|' -f4)"
  done
} >"$out"
