"""Reads or changes rows of a table with nested columns with PyIceberg 0.12, for the tests of
nested paths (issue 20).

usage: nested_rows.py CATALOG_DB WAREHOUSE CATALOG_NAME rows TABLE [COL=VALUE]
       nested_rows.py CATALOG_DB WAREHOUSE CATALOG_NAME redact TABLE KEY ID[,ID...] STRUCT.FIELD TEXT

`rows` prints the rows (where COL equals VALUE) as JSON, nested values as JSON objects and
lists, maps as lists of [key, value]. `redact` sets STRUCT.FIELD to TEXT in the rows whose KEY is
one of the IDs (an overwrite of those rows, as a reviewer would do with PyIceberg) and prints
the number of rows changed.
"""
import json
import sys

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo, In


def plain(v):
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def main() -> int:
    db, warehouse, name, cmd, table_name, *rest = sys.argv[1:]
    catalog = SqlCatalog(name, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    table = catalog.load_table(table_name)
    if cmd == "rows":
        kwargs = {}
        if rest:
            col, val = rest[0].split("=", 1)
            kwargs["row_filter"] = EqualTo(col, val)
        rows = table.scan(**kwargs).to_arrow().to_pylist()
        print(json.dumps([plain(r) for r in rows], sort_keys=True))
        return 0
    if cmd == "redact":
        key, ids, path, text = rest
        ids = ids.split(",")
        struct, field = path.split(".", 1)
        rows = table.scan(row_filter=In(key, ids)).to_arrow().to_pylist()
        for r in rows:
            r[struct][field] = text
        arrow = pa.Table.from_pylist(rows, schema=table.schema().as_arrow())
        table.overwrite(arrow, overwrite_filter=In(key, ids))
        print(json.dumps({"changed": len(rows)}))
        return 0
    raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    sys.exit(main())
