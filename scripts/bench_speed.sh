#!/usr/bin/env bash
# Issue 18's figures (BENCHMARKS.md section 16), each side by side in one run:
#   bash scripts/bench_speed.sh [OUT_DIR] [SCAN_SCALES] [ERASE_SCALES]   ("" skips a part)
# defaults: /tmp/lethe-bench-speed, "10 100", "1 10 100".
#  - the proof scan: for each scan scale a fresh demo; `cat` of every file the scan reads
#    (warehouse and raw/) with a warm cache, best of 3; `lethe scan --subject learner=3590`
#    (whole process, and the scan's own seconds it reports); `lethe bench scan --subjects 1000`
#    (1 vs 1,000 subjects); scripts/bench_scan_py.py, an independent pyarrow + fastavro scan.
#  - one erasure: for each erase scale two demos made by the same `demo init` (identical data;
#    a copy with `cp` would not do, the catalog holds absolute paths); `lethe erase` of learner
#    3590 on one, scripts/bench_erase_py.py (PyIceberg 0.12: the plan's row changes,
#    expire_snapshots, a sweep) on the other; both whole processes under /usr/bin/time -v.
#    A third demo made with `demo init --warehouse-only` (the same tables, no stores outside
#    the warehouse) is erased by lethe too: the part PyIceberg's side also does. Each side runs
#    LETHE_BENCH_ROUNDS times (default 3), interleaved, each on a fresh copy restored at the
#    same path. A run that fails fails the benchmark (an erasure must exit 0 and finish; a scan
#    may exit 0 or 1, the learner being there before the erasure), and after each round every
#    lethe side's tables are compared with PyIceberg's, row for row
#    (scripts/bench_compare_py.py; RECOMPUTE tables excepted, PyIceberg's side only stands in
#    for the rerun): a difference fails the benchmark too. Each side's time is reported whole
#    (the process under /usr/bin/time) and in-process (lethe's `seconds` in its JSON report,
#    PyIceberg's `in_process_seconds`: imports and the interpreter's start excluded).
# LETHE_BEFORE=/path/to/lethe: the scan part also runs that binary (an older build), each of
# its runs right after the current one's on the same files ("before" and "after" interleaved).
# and the erase part has that binary erase a --warehouse-only copy too, in
# the same rounds ("before-wh"): a before/after comparison on the same machine state.
# Uses the release binary (set CARGO_TARGET_DIR to reuse a build; LETHE_BIN=/path/to/lethe
# uses that binary instead of building one) and the PyIceberg venv.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/lethe-bench-speed}"
scan_scales="${2-10 100}"
erase_scales="${3-1 10 100}"
rm -rf "$out"; mkdir -p "$out"
target="${CARGO_TARGET_DIR:-target}"
if [ -n "${LETHE_BIN:-}" ]; then
  lethe="$(realpath "$LETHE_BIN")"
else
  cargo build --release -p lethe-cli >&2
  lethe="$(realpath "$target/release/lethe")"
fi
py="$(bash scripts/python-env.sh)"
scripts="$(pwd)/scripts"
# timed NAME CMD... : runs CMD under /usr/bin/time -v, prints "NAME wall=.. ms=.. peak_rss_kB=..";
# wall is /usr/bin/time's (10 ms steps, too coarse for a 0.1 s erasure), ms the shell's clock
# around the same process (microseconds), also appended to $out/walls.txt as "NAME MS" when
# CMD succeeded. Returns CMD's exit code (set -e doesn't stop a function called in a list).
timed() {
  local name="$1"; shift
  local t0 t1 rc=0
  t0=$EPOCHREALTIME
  /usr/bin/time -v -o "$out/$name.time" "$@" > "$out/$name.out" || rc=$?
  t1=$EPOCHREALTIME
  if [ "$rc" -ne 0 ]; then
    echo "$name exited $rc" >&2
    return "$rc"
  fi
  local s kb ms
  s=$(grep "Elapsed (wall clock)" "$out/$name.time" | awk '{print $NF}')
  kb=$(grep "Maximum resident" "$out/$name.time" | awk '{print $NF}')
  ms=$(echo "($t1 - $t0) * 1000" | bc)
  echo "$name $ms" >> "$out/walls.txt"
  printf '%s wall=%s ms=%.1f peak_rss_kB=%s\n' "$name" "$s" "$ms" "$kb"
}
now() { echo "$EPOCHREALTIME"; }
fail() { echo "bench_speed.sh: $*" >&2; exit 1; }
# erased NAME DIR BIN: one timed `lethe erase` of learner 3590 in DIR, which must succeed and
# finish; appends "NAME SECONDS" (lethe's own in-process time) to $out/inproc.txt.
erased() {
  local name="$1" d="$2" bin="$3" rc=0
  (cd "$d" && timed "$name" "$bin" erase --subject learner=3590 --request e-1 --min-age 0 --json) || rc=$?
  [ "$rc" -eq 0 ] || { tail -n 20 "$out/$name.out" >&2; return 1; }
  "$py" - "$out/$name.out" "$name" >> "$out/inproc.txt" <<'EOF2' || return 1
import json, sys
r = json.load(open(sys.argv[1]))
j = r["journal"]
if r.get("dry_run") or not j.get("finished_at"):
    sys.exit(f"{sys.argv[2]}: the erasure did not finish")
print(sys.argv[2], r.get("seconds", float("nan")))  # an older lethe doesn't report it
EOF2
  printf '  %s in-process=%.3fs\n' "$name" "$(tail -n 1 "$out/inproc.txt" | cut -d' ' -f2)"
}

for scale in $scan_scales; do
  d="$out/scan$scale"
  echo "== proof scan at scale $scale"
  "$lethe" demo init --dir "$d" --scale "$scale" > /dev/null 2>&1
  files=$(find "$d/warehouse" "$d/raw" -type f | wc -l)
  bytes=$(find "$d/warehouse" "$d/raw" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
  echo "files=$files bytes=$bytes disk=$(du -sh "$d" | cut -f1)"
  for _ in 1 2; do find "$d/warehouse" "$d/raw" -type f -exec cat {} + > /dev/null; done
  best=
  for _ in 1 2 3; do
    s=$(now); find "$d/warehouse" "$d/raw" -type f -exec cat {} + > /dev/null; e=$(now)
    t=$(echo "$e - $s" | bc)
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc)" = 1 ]; then best=$t; fi
  done
  echo "cat-$scale seconds=$best bytes_per_second=$(echo "$bytes / $best" | bc)"
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  sides="after"; [ -n "${LETHE_BEFORE:-}" ] && sides="after before"
  for run in $(seq "${LETHE_BENCH_ROUNDS:-3}"); do
    for side in $sides; do
      bin="$lethe"; name="scan-$scale-$run"
      if [ "$side" = before ]; then bin="$LETHE_BEFORE"; name="scan-before-$scale-$run"; fi
      # 1: files hold the learner, as they do before any erasure; anything else failed.
      rc=0; (cd "$d" && timed "$name" "$bin" scan --subject learner=3590 --json) || rc=$?
      [ "$rc" -le 1 ] || fail "$name: lethe scan failed (exit $rc)"
      "$py" - "$out/$name.out" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"  scan seconds={d['seconds']:.3f} bytes_per_second={d['bytes_read'] / d['seconds']:.0f}"
      f" files={d['files_read']} files_holding={d['files_holding']} hits={len(d['hits'])}")
EOF
    done
  done
  if [ -n "${LETHE_BEFORE:-}" ]; then
    # The same hits before and after (the JSON lists them in a stable order).
    "$py" - "$out/scan-$scale-1.out" "$out/scan-before-$scale-1.out" <<'EOF'
import json, sys
a, b = (json.load(open(f))["hits"] for f in sys.argv[1:])
print(f"  hits after={len(a)} before={len(b)} identical={a == b}")
EOF
  fi
  for side in $sides; do
    bin="$lethe"; name="bench-scan-$scale"
    if [ "$side" = before ]; then bin="$LETHE_BEFORE"; name="bench-scan-before-$scale"; fi
    (cd "$d" && timed "$name" "$bin" bench scan --subjects 1000 && cat "$out/$name.out")
  done
  (cd "$d" && timed "py-scan-$scale" "$py" "$scripts/bench_scan_py.py" catalog.db warehouse 3590 warehouse raw && cat "$out/py-scan-$scale.out")
  rm -rf "$d"
done

rounds="${LETHE_BENCH_ROUNDS:-3}"
for scale in $erase_scales; do
  echo "== erase learner 3590 at scale $scale: lethe vs PyIceberg 0.12 on an identical copy, $rounds rounds"
  for who in lethe py; do "$lethe" demo init --dir "$out/erase$scale-$who" --scale "$scale" > /dev/null 2>&1; done
  # The same warehouse without the stores outside it (PyIceberg's side does only the warehouse).
  "$lethe" demo init --dir "$out/erase$scale-wh" --scale "$scale" --warehouse-only > /dev/null 2>&1
  sides="lethe wh py"
  if [ -n "${LETHE_BEFORE:-}" ]; then
    "$lethe" demo init --dir "$out/erase$scale-bwh" --scale "$scale" --warehouse-only > /dev/null 2>&1
    # The catalog as a lethe before WAL mode left it (rollback journal).
    "$py" -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print("before-wh journal_mode:", c.execute("PRAGMA journal_mode=DELETE").fetchone()[0]); c.close()' "$out/erase$scale-bwh/catalog.db"
    sides="bwh lethe wh py"
  fi
  echo "disk=$(du -sh "$out/erase$scale-lethe" | cut -f1) per copy"
  # The plan, from the warehouse-only copy (the same tables; explain would probe the vendor
  # the full demo registers, which isn't served yet, and exit 1).
  (cd "$out/erase$scale-wh" && "$lethe" explain --subject learner=3590 --json > "$out/plan-$scale.json") ||
    fail "lethe explain failed at scale $scale"
  # Each round erases a fresh copy restored at the same path (the catalog holds absolute paths).
  for who in $sides; do cp -a "$out/erase$scale-$who" "$out/erase$scale-$who.pristine"; done
  for round in $(seq "$rounds"); do
    for who in $sides; do
      d="$out/erase$scale-$who"
      if [ "$round" -gt 1 ]; then rm -rf "$d"; cp -a "$d.pristine" "$d"; fi
      sync
      case $who in
        lethe)
          # The demo's erasure reaches the helpdesk vendor's API too: served beside it, stopped after.
          (cd "$d" && exec "$lethe" demo vendor > "$out/vendor-$scale.log" 2>&1) &
          vendor=$!
          sleep 1
          ok=0; erased "erase-lethe-$scale-$round" "$d" "$lethe" || ok=$?
          kill "$vendor"; wait "$vendor" 2> /dev/null || true
          [ "$ok" -eq 0 ] || fail "erase-lethe-$scale-$round: lethe erase failed"
          ;;
        wh) erased "erase-lethe-wh-$scale-$round" "$d" "$lethe" || fail "erase-lethe-wh-$scale-$round: lethe erase failed" ;;
        bwh) erased "erase-before-wh-$scale-$round" "$d" "$LETHE_BEFORE" || fail "erase-before-wh-$scale-$round: lethe erase failed" ;;
        py)
          (cd "$d" && timed "erase-py-$scale-$round" "$py" "$scripts/bench_erase_py.py" catalog.db warehouse "$out/plan-$scale.json" && cat "$out/erase-py-$scale-$round.out") ||
            fail "erase-py-$scale-$round: PyIceberg's side failed"
          "$py" -c 'import json, sys; print(sys.argv[2], json.load(open(sys.argv[1]))["in_process_seconds"])' \
            "$out/erase-py-$scale-$round.out" "erase-py-$scale-$round" >> "$out/inproc.txt"
          ;;
      esac
    done
    # The same result as PyIceberg's, or the times compare different work.
    for who in $sides; do
      [ "$who" = py ] && continue
      "$py" "$scripts/bench_compare_py.py" "$out/erase$scale-$who/catalog.db" "$out/erase$scale-$who/warehouse" \
        "$out/erase$scale-py/catalog.db" "$out/erase$scale-py/warehouse" "$out/plan-$scale.json" > "$out/compare-$who-$scale-$round.json" ||
        { cat "$out/compare-$who-$scale-$round.json"; fail "round $round at scale $scale: lethe's $who side and PyIceberg's differ"; }
      echo "  round $round: $who = PyIceberg $(cat "$out/compare-$who-$scale-$round.json")"
    done
  done
  for who in $sides; do rm -rf "$out/erase$scale-$who" "$out/erase$scale-$who.pristine"; done
  # Each side's best and median, whole process and in-process, and PyIceberg's time over
  # lethe's.
  "$py" - "$out/walls.txt" "$out/inproc.txt" "$scale" <<'EOF'
import statistics, sys
walls, inproc, scale = sys.argv[1], sys.argv[2], sys.argv[3]
sides = {"lethe": "erase-lethe", "wh": "erase-lethe-wh", "before-wh": "erase-before-wh",
         "py": "erase-py"}
def read(path, factor):
    out = {}
    for line in open(path):
        name, t = line.split()
        head, _, rnd = name.rpartition("-")
        for side, prefix in sides.items():
            if head == f"{prefix}-{scale}" and rnd.isdigit():
                out.setdefault(side, []).append(float(t) * factor)
    return out
whole, inside = read(walls, 1), read(inproc, 1000)
for side, v in whole.items():
    w = inside.get(side, [])
    print(f"  {side}: whole process best {min(v):.1f} ms, median {statistics.median(v):.1f} ms;"
          f" in-process best {min(w):.1f} ms, median {statistics.median(w):.1f} ms over {len(v)} rounds")
for side in ("wh", "lethe"):
    for what, ms in (("whole process", whole), ("in-process", inside)):
        if side in ms and "py" in ms:
            best = min(ms["py"]) / min(ms[side])
            med = statistics.median(ms["py"]) / statistics.median(ms[side])
            print(f"  PyIceberg / lethe {side}, {what}: {best:.1f}x best to best, {med:.1f}x median to median")
EOF
done
