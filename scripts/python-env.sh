#!/usr/bin/env bash
# Installs the Python environment the interop tests read lethe's warehouses with:
# PyIceberg 0.12 (SQL catalog on SQLite, PyArrow) in a venv. Prints the venv's python.
# Reuses the venv when it already has the right versions.
set -euo pipefail
venv="${LETHE_VENV:-$HOME/.cache/lethe-venv}"
want="pyiceberg[sql-sqlite,pyarrow]==0.12.0"
py="$venv/bin/python"
if [ -x "$py" ] && "$py" -c 'import pyiceberg, pyarrow, sqlalchemy; assert pyiceberg.__version__ == "0.12.0"' 2>/dev/null; then
  echo "$py"
  exit 0
fi
echo "installing $want into $venv" >&2
rm -rf "$venv"
python3 -m venv "$venv" >&2
"$venv/bin/pip" install --quiet --disable-pip-version-check "$want" >&2
"$py" -c 'import pyiceberg; print("pyiceberg", pyiceberg.__version__)' >&2
echo "$py"
