#!/usr/bin/env bash
# Benchmark of issue 19 (BENCHMARKS.md section 18): the proof scan and a 1,000-subject batch
# rewrite on the demo in SeaweedFS (PostgreSQL catalog over S3), with the local engine, one
# Ballista executor and two, at each scale of SCALES (default "10 100").
#
# Usage: LETHE=path/to/lethe bash scripts/bench_ballista.sh [OUT_FILE]
#   (default LETHE: $CARGO_TARGET_DIR/debug/lethe, else target/debug/lethe; build it first)
# It starts its own SeaweedFS + PostgreSQL (scripts/services.sh) and clusters
# (scripts/ballista.sh) on 127.0.0.1 free ports in a temporary folder, and stops them at the end.
#
# Per scale: one demo; then for each engine (local, 1 executor, 2 executors, each cluster
# started fresh so its peak memory is its own): `lethe scan --subject learner=3590` (read only,
# the same work each time), the same scan with one object per task (the scheduler's overhead
# per task is the difference over the extra tasks), and `lethe erase` of a batch of 1,000
# learners — a different 1,000 for each engine, so each erase rewrites the tables of an
# unerased batch (the tables shrink by 2% of their rows per batch at scale 10). Wall time and
# client peak RSS from /usr/bin/time -v; executors' peak RSS from /proc/PID/status VmHWM.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out=${1:-/dev/stdout}
scales=${SCALES:-"10 100"}
target=${CARGO_TARGET_DIR:-$here/../target}
lethe=${LETHE:-$target/debug/lethe}
[ -x "$lethe" ] || { echo "no lethe binary at $lethe (cargo build -p lethe-cli first)" >&2; exit 1; }
lethe=$(cd "$(dirname "$lethe")" && pwd)/$(basename "$lethe")

state=$(mktemp -d "${TMPDIR:-/tmp}/lethe-bench-ballista.XXXXXX")
cleanup() {
  bash "$here/ballista.sh" stop "$state/cluster" >/dev/null 2>&1 || true
  bash "$here/services.sh" stop "$state/services" >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
LETHE_SERVICES_OWNER_PID=$$ bash "$here/services.sh" start all "$state/services" >&2
set -a
# shellcheck disable=SC1091
. "$state/services/env"
set +a
export PGPASSWORD=$LETHE_PG_PASSWORD
pg="postgresql://$LETHE_PG_USER@$LETHE_PG_HOST:$LETHE_PG_PORT/$LETHE_PG_DATABASE"

# run NAME CMD...: runs CMD under /usr/bin/time -v in the demo folder; prints "wall rss_mb".
run() {
  local name=$1; shift
  (cd "$demo" && /usr/bin/time -v "$@" >"$state/$name.out" 2>"$state/$name.err") || {
    local rc=$?
    # scan exits 1 when the learner is found (HOLDING): that is the expected answer here.
    if [ "$rc" != 1 ]; then tail -n 30 "$state/$name.err" >&2; exit "$rc"; fi
  }
  python3 - "$state/$name.err" <<'EOF'
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", t)
wall = (int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3)))
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) / 1024
print(f"{wall:.2f} {rss:.0f}")
EOF
}

# The ballista line of a run's stderr for JOB (scan or rewrite TABLE): "tasks files MiB s".
jobline() {
  grep -E "^ballista: $2:" "$state/$1.err" | head -n 1 | sed -E 's/^ballista: [^:]*: //' || true
}

executor_rss() {
  local pids total=0 p kb
  pids=$(grep LETHE_BALLISTA_EXECUTOR_PIDS "$state/cluster/ballista.env" | sed -E 's/.*="?([^"]*)"?/\1/')
  for p in $pids; do
    kb=$(awk '/VmHWM/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
    [ "$kb" -gt "$total" ] && total=$kb
  done
  echo $((total / 1024))
}

{
echo "| scale | engine | scan wall, client RSS | scan job (tasks, files, MiB, MiB/task) | scan, 1 object per task | overhead per task | erase 1,000 wall, client RSS | rewrite jobs (tasks, MiB, time in jobs) | executor peak RSS |"
echo "|---|---|---|---|---|---|---|---|---|"
} >"$state/table.md"

for scale in $scales; do
  demo=$state/demo$scale
  mkdir -p "$state"
  t0=$(date +%s.%N)
  (cd "$state" && "$lethe" demo init --dir "demo$scale" --warehouse-only --scale "$scale" \
    --catalog postgres --catalog-uri "$pg" --catalog-name "bench$scale" \
    --warehouse "s3://$LETHE_S3_BUCKET/bench-$scale" --s3-path-style true >/dev/null 2>"$state/init.err") ||
    { tail -n 20 "$state/init.err" >&2; exit 1; }
  echo "scale $scale: demo built in $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.0f}')" "$t0" "$(date +%s.%N)") s" >&2
  cp "$demo/lethe.toml" "$state/lethe.toml.$scale"
  learners=$((5000 * scale))
  step=$((learners / 3000))
  k=0
  for engine in local 1 2; do
    flags=()
    if [ "$engine" != local ]; then
      LETHE_BIN=$lethe LETHE_EXECUTOR_LOG=info LETHE_EXECUTOR_TASKS=2 LETHE_SERVICES_OWNER_PID=$$ \
        bash "$here/ballista.sh" start "$state/cluster" "$engine" >&2
      sched=$(grep LETHE_BALLISTA_SCHEDULER= "$state/cluster/ballista.env" | sed -E 's/.*=//')
      flags=(--engine ballista --scheduler "$sched")
    fi
    # Scan tasks of at most 32 objects (the default, 256 objects or 64 MiB, makes one task of
    # a scale-10 warehouse).
    cp "$state/lethe.toml.$scale" "$demo/lethe.toml"
    printf '\n[engine]\ntask_objects = 32\n' >>"$demo/lethe.toml"
    read -r sw sr < <(run "scan-$scale-$engine" "$lethe" scan --subject learner=3590 "${flags[@]}")
    cp "$state/lethe.toml.$scale" "$demo/lethe.toml"
    sjob=$(jobline "scan-$scale-$engine" scan)
    s1=- ; ov=-
    if [ "$engine" != local ]; then
      cp "$state/lethe.toml.$scale" "$demo/lethe.toml"
      printf '\n[engine]\ntask_objects = 1\n' >>"$demo/lethe.toml"
      read -r s1w _ < <(run "scan1-$scale-$engine" "$lethe" scan --subject learner=3590 "${flags[@]}")
      cp "$state/lethe.toml.$scale" "$demo/lethe.toml"
      s1job=$(jobline "scan1-$scale-$engine" scan)
      t_many=$(echo "$s1job" | sed -E 's/^([0-9]+) tasks.*/\1/')
      t_few=$(echo "$sjob" | sed -E 's/^([0-9]+) tasks.*/\1/')
      ov=$(python3 -c "import sys; a,b,c,d=map(float,sys.argv[1:]); print(f'{(c-a)/max(d-b,1)*1000:.0f} ms' )" "$sw" "$t_few" "$s1w" "$t_many")
      s1="$s1w s ($t_many tasks)"
    fi
    python3 - "$k" "$step" >"$state/batch.txt" <<'EOF'
import sys
k, step = int(sys.argv[1]), int(sys.argv[2])
for i in range(1000):
    print(f"erasure-{k}{i:04d} learner={1 + (k * 1000 + i) * step}")
EOF
    read -r ew er < <(run "erase-$scale-$engine" "$lethe" erase --subjects-file "$state/batch.txt" --min-age 0 "${flags[@]}")
    rjobs=$({ grep -E "^ballista: rewrite" "$state/erase-$scale-$engine.err" || true; } |
      sed -E 's/^ballista: rewrite ([^:]*): ([0-9]+) tasks, [0-9]+ files, ([0-9.]+) MiB.*, ([0-9.]+) s$/\1 \2 \3 \4/' |
      awk '{t+=$2; m+=$3; s+=$4; n++} END {if (n) printf "%d jobs, %d tasks, %.1f MiB, %.2f s in jobs", n, t, m, s; else print "-"}')
    xr=-
    if [ "$engine" != local ]; then
      xr="$(executor_rss) MB"
      bash "$here/ballista.sh" stop "$state/cluster"
    fi
    name=$engine; [ "$engine" != local ] && name="$engine executor(s)"
    echo "| $scale | $name | $sw s, $sr MB | ${sjob:--} | $s1 | $ov | $ew s, $er MB | $rjobs | $xr |" >>"$state/table.md"
    echo "scale $scale $name done" >&2
    k=$((k + 1))
  done
done
{
  cat "$state/table.md"
  echo
  echo "Every job the cluster ran (the client's \`ballista:\` lines):"
  echo
  for f in "$state"/scan-*.err "$state"/scan1-*.err "$state"/erase-*.err; do
    [ -f "$f" ] || continue
    grep -E "^ballista:" "$f" | sed "s|^|    $(basename "$f" .err): |" || true
  done
} >"$out"
[ "$out" = /dev/stdout ] || cat "$out"
