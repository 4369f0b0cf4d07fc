"""A second writer: appends rows to a lethe table with PyIceberg 0.12 (used by the concurrency
test). Rows are given as JSON lines on stdin, in the table's column names.

usage: append_rows.py CATALOG_DB WAREHOUSE CATALOG_NAME TABLE
"""
import json
import sys
from datetime import datetime

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow


def main() -> int:
    db, warehouse, name, table_name = sys.argv[1:]
    catalog = SqlCatalog(name, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    table = catalog.load_table(table_name)
    rows = [json.loads(line) for line in sys.stdin if line.strip()]
    schema = schema_to_pyarrow(table.schema())
    for field in schema:
        if pa.types.is_timestamp(field.type) or pa.types.is_date(field.type):
            for row in rows:
                value = row.get(field.name)
                if isinstance(value, str):
                    parsed = datetime.fromisoformat(value)
                    row[field.name] = parsed.date() if pa.types.is_date(field.type) else parsed
    data = pa.Table.from_pylist(rows, schema=schema)
    table.append(data)
    print(json.dumps({"appended": data.num_rows, "snapshot": table.current_snapshot().snapshot_id}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
