"""Plants a row in a table's history with PyIceberg 0.12: appends it (a snapshot that holds it),
then deletes it again (the current snapshot doesn't), so that only time travel to the first
snapshot reads it. Prints JSON: the snapshot that holds the row and the current one.

usage: plant_row.py CATALOG_DB WAREHOUSE CATALOG_NAME TABLE KEY_COLUMN   (the row as JSON on stdin)
"""
import json
import sys

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo


def main() -> int:
    db, warehouse, name, table_name, key = sys.argv[1:6]
    row = json.loads(sys.stdin.read())
    catalog = SqlCatalog(name, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    table = catalog.load_table(table_name)
    table.append(pa.Table.from_pylist([row], schema=table.schema().as_arrow()))
    holding = table.current_snapshot().snapshot_id
    table = catalog.load_table(table_name)
    table.delete(EqualTo(key, row[key]))
    print(json.dumps({"holding": holding, "current": table.current_snapshot().snapshot_id}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
