"""Reads every snapshot a table keeps with PyIceberg 0.12 (time travel by snapshot id) and prints
JSON: per table, per snapshot, its refs and its rows (the columns asked for, as text).

usage: read_snapshots.py CATALOG_DB WAREHOUSE CATALOG_NAME TABLE[:COL,COL...] ...

An independent reader for the logical checks of the tests: it shares no code with lethe.
"""
import json
import sys

from pyiceberg.catalog.sql import SqlCatalog


def text(v):
    return None if v is None else str(v)


def main() -> int:
    db, warehouse, name, *specs = sys.argv[1:]
    catalog = SqlCatalog(name, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    out = {}
    for spec in specs:
        table_name, _, cols = spec.partition(":")
        table = catalog.load_table(table_name)
        columns = [c for c in cols.split(",") if c] or None
        refs = {}
        for ref_name, ref in table.metadata.refs.items():
            refs.setdefault(ref.snapshot_id, []).append(ref_name)
        snaps = {}
        for s in table.metadata.snapshots:
            scan = table.scan(snapshot_id=s.snapshot_id)
            if columns:
                scan = table.scan(snapshot_id=s.snapshot_id, selected_fields=tuple(columns))
            arrow = scan.to_arrow()
            rows = [{k: text(v) for k, v in r.items()} for r in arrow.to_pylist()]
            snaps[str(s.snapshot_id)] = {
                "refs": sorted(refs.get(s.snapshot_id, [])),
                "current": s.snapshot_id == table.metadata.current_snapshot_id,
                "rows": rows,
            }
        out[table_name] = snaps
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
