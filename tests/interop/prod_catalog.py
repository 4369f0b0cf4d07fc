"""PyIceberg 0.12 on a production catalog lethe works on: the SeaweedFS REST catalog or the SQL
catalog on PostgreSQL, both over S3. Prints JSON.

usage: prod_catalog.py rest|sql CATALOG_NAME read [TABLE[?COL=VALUE]] ...
       prod_catalog.py rest|sql CATALOG_NAME append TABLE        (JSON lines on stdin)

The catalog and S3 settings come from the environment the project's services.sh writes:
LETHE_REST_URI, LETHE_REST_WAREHOUSE, LETHE_REST_CREDENTIAL (rest); LETHE_PG_SQLALCHEMY_URI
(sql); LETHE_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY. Nothing secret is printed
(PyIceberg copies catalog properties into table.io.properties: never print those).
`read` with no table reads every table of the catalog; `?COL=VALUE` counts the rows where COL
equals VALUE (an integer when it parses as one).
"""
import json
import os
import sys
from datetime import datetime

import pyarrow as pa
from pyiceberg.expressions import EqualTo
from pyiceberg.io.pyarrow import schema_to_pyarrow


def s3_props() -> dict:
    return {
        "s3.endpoint": os.environ["LETHE_S3_ENDPOINT"],
        "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
        "s3.region": os.environ.get("LETHE_S3_REGION", "us-east-1"),
        "s3.path-style-access": "true",
    }


def catalog(kind: str, name: str):
    if kind == "rest":
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(
            name,
            uri=os.environ["LETHE_REST_URI"],
            warehouse=os.environ.get("LETHE_REST_WAREHOUSE", "s3://warehouse"),
            credential=os.environ["LETHE_REST_CREDENTIAL"],
            scope="catalog",
            **s3_props(),
        )
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(name, uri=os.environ["LETHE_PG_SQLALCHEMY_URI"], **s3_props())


def all_tables(c) -> list:
    out = []
    stack = [ns for ns in c.list_namespaces()]
    while stack:
        ns = stack.pop()
        out.extend(".".join(t) for t in c.list_tables(ns))
        try:
            stack.extend(c.list_namespaces(ns))
        except Exception:
            pass
    return sorted(set(out))


def read(c, specs: list) -> dict:
    if not specs:
        specs = all_tables(c)
    out = {}
    for spec in specs:
        filt = None
        cond = ""
        if "?" in spec:
            spec, cond = spec.split("?", 1)
            col, val = cond.split("=", 1)
            try:
                val = int(val)
            except ValueError:
                pass
            filt = EqualTo(col, val)
        table = c.load_table(spec)
        kwargs = {"row_filter": filt} if filt is not None else {}
        arrow = table.scan(**kwargs).to_arrow()
        key = spec + (f"?{cond}" if filt is not None else "")
        out[key] = {
            "rows": arrow.num_rows,
            "snapshots": len(table.snapshots()),
            "columns": arrow.schema.names,
            "location": table.location(),
        }
    return out


def append(c, table_name: str) -> dict:
    table = c.load_table(table_name)
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
    return {"appended": data.num_rows, "snapshot": table.current_snapshot().snapshot_id}


def main() -> int:
    kind, name, command, *rest = sys.argv[1:]
    c = catalog(kind, name)
    if command == "read":
        out = read(c, rest)
    elif command == "append":
        out = append(c, rest[0])
    else:
        print(json.dumps({"error": f"unknown command {command}"}))
        return 2
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
