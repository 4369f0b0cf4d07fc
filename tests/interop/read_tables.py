"""Reads a lethe warehouse with PyIceberg 0.12 (SqlCatalog on the same SQLite file) and prints
JSON: for each table, the rows of the current snapshot (and of given snapshots, by time travel).

usage: read_tables.py CATALOG_DB WAREHOUSE CATALOG_NAME [TABLE[@SNAPSHOT]] ...
With no table, every table of the catalog is read. A table spec may add ?COL=VALUE to count
the rows where COL equals VALUE (an integer when it parses as one).
"""
import json
import sys

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo


def main() -> int:
    db, warehouse, name, *specs = sys.argv[1:]
    catalog = SqlCatalog(name, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    if not specs:
        specs = [f"{ns[0]}.{t[-1]}" for ns in catalog.list_namespaces() for t in catalog.list_tables(ns)]
    out = {}
    for spec in specs:
        filt = None
        if "?" in spec:
            spec, cond = spec.split("?", 1)
            col, val = cond.split("=", 1)
            try:
                val = int(val)
            except ValueError:
                pass
            filt = EqualTo(col, val)
        table_name, _, snap = spec.partition("@")
        table = catalog.load_table(table_name)
        kwargs = {}
        if snap:
            kwargs["snapshot_id"] = int(snap)
        if filt is not None:
            kwargs["row_filter"] = filt
        arrow = table.scan(**kwargs).to_arrow()
        key = spec + (f"?{cond}" if filt is not None else "")
        out[key] = {
            "rows": arrow.num_rows,
            "snapshots": len(table.snapshots()),
            "columns": arrow.schema.names,
        }
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
