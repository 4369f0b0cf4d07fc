#!/usr/bin/env bash
# Fuzz the proof scan's byte-level search (`lethe_scan::scan_bytes`, fuzz/fuzz_targets/scan_bytes.rs)
# for SECONDS, starting from a seed corpus made of a demo's small files and pyarrow-written
# Parquet files in every encoding the byte search handles (scripts/fuzz_seeds.py).
#
#   bash scripts/fuzz.sh [SECONDS] [JOBS]        # default 600 s, 1 job
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and a nightly toolchain, or RUSTC_BOOTSTRAP=1
# on stable. The fuzz build (AddressSanitizer) goes to $LETHE_FUZZ_TARGET (default
# ~/.cache/lethe-fuzz-target), the corpus to $LETHE_FUZZ_CORPUS (default
# ~/.cache/lethe-fuzz-corpus/scan_bytes); crashes land in fuzz/artifacts/scan_bytes/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
jobs=${2:-1}
target=${LETHE_FUZZ_TARGET:-$HOME/.cache/lethe-fuzz-target}
corpus=${LETHE_FUZZ_CORPUS:-$HOME/.cache/lethe-fuzz-corpus/scan_bytes}
toolchain=()
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then toolchain=(+nightly); else export RUSTC_BOOTSTRAP=1; fi

if [ ! -d "$corpus" ] || [ -z "$(ls -A "$corpus")" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  echo "building a demo for the seed corpus" >&2
  cargo run -q -p lethe-cli -- demo init --dir "$work/demo" >/dev/null
  python=${LETHE_PYTHON:-}
  if [ -z "$python" ]; then python=$(bash scripts/python-env.sh | tail -1); fi
  "${python:-python3}" scripts/fuzz_seeds.py "$work/demo" "$corpus"
fi

cd fuzz
CARGO_TARGET_DIR=$target cargo "${toolchain[@]}" fuzz run scan_bytes "$corpus" -- \
  -max_total_time="$seconds" -jobs="$jobs" -workers="$jobs" -rss_limit_mb=2048 -timeout=30 \
  -print_final_stats=1
