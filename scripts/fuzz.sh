#!/usr/bin/env bash
# Fuzz one target of the cargo-fuzz crate at fuzz/ for SECONDS:
#
#   bash scripts/fuzz.sh [SECONDS] [JOBS] [TARGET]    # default 600 s, 1 job, scan_bytes
#
# Targets:
#   scan_bytes            the proof scan's byte-level search (`lethe_scan::scan_bytes`), seeded
#                         with a demo's small files and pyarrow-written Parquet files in every
#                         encoding the byte search handles (scripts/fuzz_seeds.py)
#   config_lethe_toml     Config::from_text (lethe.toml)
#   config_subjects_toml  SubjectsFile::parse (governance/subjects.toml)
#   config_retention_toml RetentionFile::parse (governance/retention.toml)
#   config_metadata_toml  MetadataFile::parse (governance/metadata.toml)
#   config_holds_toml     HoldsFile::parse (governance/holds.toml)
#   config_stores_toml    stores::registry::parse (governance/stores.toml)
#   config_policy_toml    Policy::parse (governance/policy.toml)
# The config targets hold a parser to: no panic, and every error names the file, a line of
# the text and a key (fuzz/src/lib.rs); they are seeded with the file a demo writes and the
# TOML examples in the docs (scripts/fuzz_config_seeds.py).
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and a nightly toolchain, or RUSTC_BOOTSTRAP=1
# on stable. The fuzz build (AddressSanitizer) goes to $LETHE_FUZZ_TARGET (default
# ~/.cache/lethe-fuzz-target, or ~/.cache/lethe-fuzz-config-target for config targets), the
# corpus to $LETHE_FUZZ_CORPUS (default ~/.cache/lethe-fuzz-corpus/scan_bytes, or
# ~/.cache/lethe-fuzz-corpus/KIND_toml for config_KIND_toml); crashes land in
# fuzz/artifacts/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
jobs=${2:-1}
name=${3:-scan_bytes}
case "$name" in
  scan_bytes)
    target=${LETHE_FUZZ_TARGET:-$HOME/.cache/lethe-fuzz-target}
    corpus=${LETHE_FUZZ_CORPUS:-$HOME/.cache/lethe-fuzz-corpus/scan_bytes}
    ;;
  config_*_toml)
    target=${LETHE_FUZZ_TARGET:-$HOME/.cache/lethe-fuzz-config-target}
    corpus=${LETHE_FUZZ_CORPUS:-$HOME/.cache/lethe-fuzz-corpus/${name#config_}}
    ;;
  *)
    echo "unknown fuzz target '$name': see the list at the top of $0" >&2
    exit 2
    ;;
esac
toolchain=()
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then toolchain=(+nightly); else export RUSTC_BOOTSTRAP=1; fi

if [ ! -d "$corpus" ] || [ -z "$(ls -A "$corpus")" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  echo "building a demo for the seed corpus" >&2
  cargo run -q -p lethe-cli -- demo init --dir "$work/demo" >/dev/null
  if [ "$name" = scan_bytes ]; then
    python=${LETHE_PYTHON:-}
    if [ -z "$python" ]; then python=$(bash scripts/python-env.sh | tail -1); fi
    "${python:-python3}" scripts/fuzz_seeds.py "$work/demo" "$corpus"
  else
    # Seeds every kind into a scratch folder and keeps this target's (python3 with tomllib, 3.11+).
    mkdir -p "$work/corpora"
    python3 scripts/fuzz_config_seeds.py "$work/demo" "$work/corpora"
    mkdir -p "$corpus"
    cp "$work/corpora/${name#config_}"/* "$corpus"/
  fi
fi

# One job runs in this process (its log on stderr, so two targets can run side by side);
# more run as libFuzzer's jobs, each logging to fuzz/fuzz-N.log.
parallel=()
if [ "$jobs" -gt 1 ]; then parallel=(-jobs="$jobs" -workers="$jobs"); fi
cd fuzz
CARGO_TARGET_DIR=$target cargo "${toolchain[@]}" fuzz run "$name" "$corpus" -- \
  -max_total_time="$seconds" "${parallel[@]}" -rss_limit_mb=2048 -timeout=30 \
  -print_final_stats=1
