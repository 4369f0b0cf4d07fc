"""Scans tables of a lethe warehouse with PyIceberg 0.12's own scan planning and reader,
each with an optional row filter (PyIceberg's expression syntax, e.g. "customer_id = 7" or
"occurred_at >= '2026-03-01T00:00:00'"). PyIceberg prunes by partition values (its own
transforms over the manifests' partition tuples and summaries) and by column metrics, and
applies position deletes and deletion vectors itself. Prints JSON.

usage: read_scan.py CATALOG_DB WAREHOUSE CATALOG_NAME SPEC...   (SPEC: TABLE or TABLE|FILTER)

Output: a JSON object keyed by SPEC, each with `rows` (rows the scan returns), `files` (data files planned after pruning),
`delete_files` (delete files attached to them), `format_version`, `partition_fields`.
"""
import json
import sys

from pyiceberg.catalog.sql import SqlCatalog


def main() -> int:
    db, warehouse, name, *specs = sys.argv[1:]
    catalog = SqlCatalog(name, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    out = {}
    for spec in specs:
        table_name, _, row_filter = spec.partition("|")
        table = catalog.load_table(table_name)
        scan = table.scan(row_filter=row_filter) if row_filter else table.scan()
        tasks = list(scan.plan_files())
        out[spec] = {
            "rows": scan.to_arrow().num_rows,
            "files": len(tasks),
            "delete_files": sum(len(t.delete_files) for t in tasks),
            "format_version": table.metadata.format_version,
            "partition_fields": [f.name for f in table.spec().fields],
        }
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
