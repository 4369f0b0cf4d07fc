#!/usr/bin/env bash
# Issue 45's figure: an erasure that rewrites a table's kept history (a tag, a branch with three
# commits of its own, min-snapshots-to-keep = 3: seven kept snapshots get twins — the tag's,
# the branch's three, main's two before its head and main's current one) against the same
# erasure of the same table without refs, for 1 and for 1,000 subjects (one batch).
#   bash scripts/bench_history.sh [OUT_DIR] [ROWS]     (defaults /tmp/lethe-bench-history, 2000000)
# The tables are written by PyIceberg (tests/interop/make_history_fixture.py bench): ROWS rows
# of finance.ledger in 8 commits on main (the branch's 3 commits add 3/8 of ROWS more), 10,000
# customers, each holding 1 in 10,000 rows. Each side is erased by the release binary (set
# LETHE_BIN, or CARGO_TARGET_DIR to reuse a build) as a whole process under /usr/bin/time -v:
# wall, peak RSS, and the bytes of the data files the erasure wrote (new Parquet files in the
# warehouse) and removed. A run whose erasure fails, or whose logical check finds a row left,
# fails the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/lethe-bench-history}"
rows="${2:-2000000}"
rm -rf "$out"; mkdir -p "$out"
if [ -n "${LETHE_BIN:-}" ]; then
  lethe="$(realpath "$LETHE_BIN")"
else
  cargo build --release -p lethe-cli >&2
  lethe="$(realpath "${CARGO_TARGET_DIR:-target}/release/lethe")"
fi
py="$(bash scripts/python-env.sh)"
export LETHE_REGISTER_KEY=bench-history-register-key-0123456789abcdef
bytes() { find "$1" -name '*.parquet' -printf '%p %s\n' | sort; }
for refs in 1 0; do
  for n in 1 1000; do
    # Written afresh for each run (the same rows each time): a copy would keep the catalog's
    # absolute paths to the original, which lethe refuses to change.
    d="$out/refs$refs-n$n"; mkdir -p "$d"
    "$py" tests/interop/make_history_fixture.py bench "$d" lethe "$rows" "$refs" > /dev/null
    home="$d/lethe"; mkdir -p "$home"
    (cd "$home" && "$lethe" init --catalog "sqlite:///$d/catalog.db" --warehouse "$d/warehouse" > /dev/null)
    printf '[customer]\nidentifiers = ["crm.customers.customer_id"]\n' > "$home/governance/subjects.toml"
    printf '\n[snapshots]\nhistory = "rewrite"\nreason = "benchmark"\n' >> "$home/governance/retention.toml"
    seq 0 $((n - 1)) | awk '{printf "bench-%d customer=CGB%07d\n", $1, $1 * 7}' > "$home/subjects.txt"
    bytes "$d/warehouse" > "$d/before.txt"
    if ! (cd "$home" && /usr/bin/time -v -o "$d/time.txt" "$lethe" erase --subjects-file subjects.txt --min-age 0 --json > "$d/erase.json" 2> "$d/erase.err"); then
      echo "the erasure failed (refs=$refs n=$n): $(tail -3 "$d/erase.err")" >&2
      exit 1
    fi
    left=$("$py" -c 'import json,sys; j=json.load(open(sys.argv[1]))["journal"]; print(sum(s["rows"] for t in j["logical"] for s in t["snapshots"] if t["table"] != "x"))' "$d/erase.json")
    if [ "$left" != 0 ]; then echo "the logical check found $left row(s) left (refs=$refs n=$n)" >&2; exit 1; fi
    bytes "$d/warehouse" > "$d/after.txt"
    written=$(comm -13 "$d/before.txt" "$d/after.txt" | awk '{s+=$2} END {print s+0}')
    removed=$(comm -23 "$d/before.txt" "$d/after.txt" | awk '{s+=$2} END {print s+0}')
    wall=$(grep "Elapsed (wall clock)" "$d/time.txt" | awk '{print $NF}')
    kb=$(grep "Maximum resident" "$d/time.txt" | awk '{print $NF}')
    twins=$("$py" -c 'import json,sys; j=json.load(open(sys.argv[1]))["journal"]; print(sum(len(s.get("twins", [])) for s in j["steps"]))' "$d/erase.json")
    matched=$("$py" -c 'import json,sys; j=json.load(open(sys.argv[1]))["journal"]; print(sum(s["rows"] for s in j["steps"] if s["table"]=="finance.ledger"))' "$d/erase.json")
    echo "refs=$refs subjects=$n wall=$wall peak_rss_kB=$kb twins=$twins ledger_rows_on_main=$matched bytes_written=$written bytes_removed=$removed"
  done
done
