#!/usr/bin/env bash
# lethe's test command: installs what the tests need (the PyIceberg venv for interop tests),
# then runs every test of the workspace, failpoints included. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
export LETHE_PYTHON="${LETHE_PYTHON:-$(bash scripts/python-env.sh)}"
export RUST_BACKTRACE=1
cargo test --workspace --features lethe-cli/failpoints --no-fail-fast "$@"
