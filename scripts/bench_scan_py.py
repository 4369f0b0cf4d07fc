"""An independent proof scan written with pyarrow + fastavro, the comparison for lethe's scan.

usage: bench_scan_py.py CATALOG_DB WAREHOUSE LEARNER ROOT...

The traces are learner LEARNER's, read from crm.learners before the timing starts: the
identifying values (email, phone, full_name, street_address: the first 15 characters,
lowercased, as lethe searches them) and the learner_id. Then every file under the roots is read
with its format's reader and searched: Parquet with pyarrow (every column's values — strings
lowercased and matched for each prefix, integer columns named learner_id compared with the id —
and the footer's statistics), Avro with fastavro (every string and bytes value of every record,
lowercased), JSON as parsed values, anything else as lowercased bytes. It does not read page
indexes or bloom filters (pyarrow exposes neither), so it does less than lethe does. Prints one
JSON line: files, bytes, seconds of the scan, and files with a hit.
"""
import json
import os
import sys
import time

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo

VALUE_COLUMNS = ["email", "phone", "full_name", "street_address"]
PREFIX = 15


def walk_values(v, prefixes):
    if isinstance(v, str):
        low = v.lower()
        return any(p in low for p in prefixes)
    if isinstance(v, (bytes, bytearray)):
        low = bytes(v).lower()
        return any(p.encode() in low for p in prefixes)
    if isinstance(v, dict):
        return any(walk_values(k, prefixes) or walk_values(x, prefixes) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return any(walk_values(x, prefixes) for x in v)
    return False


def parquet_hit(path, prefixes, ids):
    f = pq.ParquetFile(path)
    md = f.metadata
    hit = False
    for rg in range(md.num_row_groups):
        for c in range(md.num_columns):
            st = md.row_group(rg).column(c).statistics
            if st is not None and st.has_min_max:
                hit |= walk_values(str(st.min), prefixes) or walk_values(str(st.max), prefixes)
    table = f.read()
    for name, col in zip(table.column_names, table.columns):
        t = col.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            low = pc.utf8_lower(col)
            for p in prefixes:
                if pc.any(pc.match_substring(low, p)).as_py():
                    hit = True
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
            for p in prefixes:
                if pc.any(pc.match_substring(col.cast(pa.large_binary()), p)).as_py():
                    hit = True
        elif pa.types.is_integer(t) and name == "learner_id":
            if pc.any(pc.is_in(col, value_set=pa.array(ids, type=t))).as_py():
                hit = True
        elif pa.types.is_nested(t):
            hit |= walk_values(col.to_pylist(), prefixes)
    return hit


def avro_hit(path, prefixes):
    with open(path, "rb") as fh:
        r = fastavro.reader(fh)
        hit = walk_values(r.writer_schema, prefixes)
        for rec in r:
            if walk_values(rec, prefixes):
                hit = True
    return hit


def main() -> int:
    db, warehouse, learner, *roots = sys.argv[1:]
    catalog = SqlCatalog("lethe", uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    row = catalog.load_table("crm.learners").scan(row_filter=EqualTo("learner_id", int(learner))).to_arrow()
    prefixes = [str(row.column(c)[0].as_py()).lower()[:PREFIX] for c in VALUE_COLUMNS]
    ids = [int(learner)]
    start = time.perf_counter()
    files = size = 0
    hits = []
    for root in roots:
        for dirpath, _, names in os.walk(root):
            for n in sorted(names):
                p = os.path.join(dirpath, n)
                files += 1
                size += os.path.getsize(p)
                try:
                    if n.endswith(".parquet"):
                        h = parquet_hit(p, prefixes, ids)
                    elif n.endswith(".avro"):
                        h = avro_hit(p, prefixes)
                    elif n.endswith(".json"):
                        with open(p) as fh:
                            h = walk_values(json.load(fh), prefixes)
                    else:
                        with open(p, "rb") as fh:
                            h = walk_values(fh.read(), prefixes)
                except Exception as e:  # a file the reader can't read counts as read, no hit
                    print(f"unreadable {p}: {type(e).__name__}", file=sys.stderr)
                    h = False
                if h:
                    hits.append(os.path.relpath(p, root))
    seconds = time.perf_counter() - start
    print(json.dumps({"files": files, "bytes": size, "seconds": seconds,
                      "bytes_per_second": size / seconds, "files_with_hits": len(hits)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
