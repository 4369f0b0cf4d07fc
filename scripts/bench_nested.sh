#!/usr/bin/env bash
# Nested data at scale (BENCHMARKS.md section 10): a PyIceberg warehouse of PATIENTS patients
# with a struct, a list of structs and a map (tests/interop/make_nested_warehouse.py), then
# `lethe discover`, `lethe properties apply`, and two erasures, each attested: one with the
# subject's values naming top-level columns only, one with the nested paths too (more traces
# searched for, and every nested text field read for mentions either way). Prints seconds and
# peak memory per command.
# Usage: bash scripts/bench_nested.sh PATIENTS [OUT_DIR]
# Set LETHE to the binary to measure (default: release/lethe under CARGO_TARGET_DIR or ./target).
set -euo pipefail
n="${1:?usage: bench_nested.sh PATIENTS [OUT_DIR]}"
out="${2:-/tmp/lethe-nested-$n}"
root="$(cd "$(dirname "$0")/.." && pwd)"
lethe="${LETHE:-${CARGO_TARGET_DIR:-$root/target}/release/lethe}"
py="${LETHE_PYTHON:-$(bash "$root/scripts/python-env.sh")}"
export LETHE_REGISTER_KEY="bench-nested-register-key-0123456789abcdef"
rm -rf "$out" && mkdir -p "$out/src" "$out/lethe"
"$py" "$root/tests/interop/make_nested_warehouse.py" "$out/src" hospital "$n" > "$out/info.json"
s1=$("$py" -c "import json,sys;print(json.load(open(sys.argv[1]))['subjects'][0])" "$out/info.json")
s2=$("$py" -c "import json,sys;print(json.load(open(sys.argv[1]))['subjects'][1])" "$out/info.json")
cd "$out/lethe"
"$lethe" init --catalog "sqlite:///$out/src/catalog.db" --warehouse "$out/src/warehouse" > /dev/null

timed() {
  local name="$1"; shift
  /usr/bin/time -v "$@" > "$out/$name.out" 2> "$out/$name.time" || true
  local secs cpu rss
  secs=$(grep "Elapsed (wall clock)" "$out/$name.time" | awk '{print $NF}')
  cpu=$(grep -E "User time|System time" "$out/$name.time" | awk '{s += $NF} END {printf "%.2f", s}')
  rss=$(grep "Maximum resident set size" "$out/$name.time" | awk '{print $NF}')
  printf "%-18s wall %8s  cpu %6s s  peak %5d MB\n" "$name" "$secs" "$cpu" $((rss / 1024))
}

timed discover "$lethe" discover --write
"$py" - <<'EOF'
p = 'governance/metadata.toml'
s = open(p).read()
s = s.replace('[tables."registry.patients".columns]\n', '[tables."registry.patients".columns]\n"attributes.value" = "personal"\n"attributes.key" = "internal"\n"contact.preferred" = "internal"\n')
s = s.replace('[tables."billing.claims".columns]\n', '[tables."billing.claims".columns]\n"attributes.value" = "personal"\n"attributes.key" = "internal"\n')
open(p, 'w').write(s)
open('governance/retention.toml', 'a').write('''
[tables."billing.claims"]
keep_days = 2555
counted_from = "submitted_on"

[erasure.exceptions."billing.claims"]
reason = "claims are kept for the insurer's audit"
decided_by = "legal team"
erase_columns = ["addresses.element.street", "attributes.value"]
''')
EOF
subjects() {
  cat > governance/subjects.toml <<EOF
[patient]
identifiers = ["registry.patients.patient_id"]
values = [$1]
[patient.not_identifying]
"registry.patients.addresses.element.city" = "a city is shared by many patients"
"billing.claims.addresses.element.city" = "a city is shared by many patients"
"billing.claims.amount" = "an amount doesn't single a patient out"
"registry.visits.details.notes" = "clinical notes go with the patient's visits"
EOF
}
timed properties_apply "$lethe" properties apply
subjects '"full_name"'
timed erase_top_level "$lethe" erase --subject "patient=$s1" --request top --min-age 0
timed attest_top_level "$lethe" attest --request top --json --keep-case-file
subjects '"full_name", "contact.email", "contact.phone", "addresses.element.street", "attributes.value"'
timed erase_nested "$lethe" erase --subject "patient=$s2" --request nested --min-age 0
timed attest_nested "$lethe" attest --request nested --json --keep-case-file
"$py" - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
for r in ["top", "nested"]:
    a = json.load(open(f"{out}/attest_{'top_level' if r == 'top' else 'nested'}.out"))
    print(r, a["verdict"]["physical"], "files read:", a["scan"]["files_read"],
          "traces:", len(a["searched"]["traces"]), "mentions:", sum(m["rows"] for m in a["mentions"].values()))
EOF
