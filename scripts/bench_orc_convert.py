"""Copies every Parquet data file of a warehouse into two folders, as Parquet and as ORC with
the same rows: `python bench_orc_convert.py WAREHOUSE OUT_DIR`. For issue 48's ORC scan
benchmark (scripts/bench_orc.sh). ORC files are written by pyarrow.orc (zstd, as the Parquet
files PyIceberg and lethe write); Iceberg's delete files are left out (they are no table data).
Prints `files N rows R parquet_bytes P orc_bytes O`.
"""

import os
import shutil
import sys

import pyarrow.orc as orc
import pyarrow.parquet as pq


def main():
    warehouse, out = sys.argv[1], sys.argv[2]
    pq_dir, orc_dir = os.path.join(out, "parquet"), os.path.join(out, "orc")
    os.makedirs(pq_dir)
    os.makedirs(orc_dir)
    n = rows = pq_bytes = orc_bytes = 0
    for root, _, files in os.walk(warehouse):
        for name in sorted(files):
            path = os.path.join(root, name)
            if not name.endswith(".parquet") or "/data/" not in path + "/":
                continue
            f = pq.ParquetFile(path)
            meta = f.schema_arrow.metadata or {}
            if b"delete-type" in meta or "file_path" in f.schema_arrow.names:
                continue
            table = f.read()
            stem = os.path.relpath(path, warehouse).replace("/", "__")[: -len(".parquet")]
            shutil.copyfile(path, os.path.join(pq_dir, stem + ".parquet"))
            target = os.path.join(orc_dir, stem + ".orc")
            orc.write_table(table, target, compression="zstd")
            n += 1
            rows += table.num_rows
            pq_bytes += os.path.getsize(path)
            orc_bytes += os.path.getsize(target)
    if n == 0:
        sys.exit(f"no Parquet data files under {warehouse}")
    print(f"files {n} rows {rows} parquet_bytes {pq_bytes} orc_bytes {orc_bytes}")


if __name__ == "__main__":
    main()
