"""A table fed as a stream feeds it, for the tests of an erasure beside streaming writers: written
and read with PyIceberg 0.12, sharing no code with lethe.

usage: stream_fixture.py make DIR CATALOG_NAME FILES ROWS_PER_FILE
       stream_fixture.py holding DIR CATALOG_NAME TABLE CUSTOMER...
       stream_fixture.py current DIR CATALOG_NAME TABLE

make: DIR/catalog.db and DIR/warehouse with crm.customers (customer_id, email, full_name),
web.sessions (session_id "a-<customer_id>#<n>", anonymous_id "a-<customer_id>", page) appended
FILES times, ROWS_PER_FILE rows each, every customer in every file (so an erasure of one customer
rewrites every file), and support.tickets; prints JSON with the customers and row counts.

holding: per snapshot the table keeps (time travel by id), the rows addressing each customer
(its id in customer_id, "a-ID" in anonymous_id, "a-ID#..." in session_id).

current: the session ids of the current snapshot's rows that streaming writers appended (they
start with "a-W" or "a-V"), and how many other rows there are.
"""
import json
import sys

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

CUSTOMERS = [f"CGB{n:07d}" for n in range(100, 140)]


def catalog(out_dir, name):
    return SqlCatalog(
        name,
        uri=f"sqlite:///{out_dir}/catalog.db",
        warehouse=f"file://{out_dir}/warehouse",
    )


def make(out_dir, name, files, per_file):
    cat = catalog(out_dir, name)
    for ns in ("crm", "web", "support"):
        cat.create_namespace(ns)
    customers = cat.create_table(
        "crm.customers",
        Schema(
            NestedField(1, "customer_id", StringType(), required=False),
            NestedField(2, "email", StringType(), required=False),
            NestedField(3, "full_name", StringType(), required=False),
        ),
    )
    customers.append(
        pa.table(
            {
                "customer_id": CUSTOMERS,
                "email": [f"{c.lower()}.stream@mailbox-example.org" for c in CUSTOMERS],
                "full_name": [f"Customer {c[-3:]} Stream" for c in CUSTOMERS],
            }
        )
    )
    sessions = cat.create_table(
        "web.sessions",
        Schema(
            NestedField(1, "session_id", StringType(), required=False),
            NestedField(2, "anonymous_id", StringType(), required=False),
            NestedField(3, "page", StringType(), required=False),
        ),
    )
    n = 0
    for f in range(files):
        rows = {"session_id": [], "anonymous_id": [], "page": []}
        for i in range(per_file):
            c = CUSTOMERS[i % len(CUSTOMERS)]
            n += 1
            rows["session_id"].append(f"a-{c}#{n}")
            rows["anonymous_id"].append(f"a-{c}")
            rows["page"].append(f"/course/{f}/{i % 97}")
        sessions.append(pa.table(rows, schema=sessions.schema().as_arrow()))
    tickets = cat.create_table(
        "support.tickets",
        Schema(
            NestedField(1, "ticket_id", LongType(), required=False),
            NestedField(2, "customer_id", StringType(), required=False),
            NestedField(3, "body", StringType(), required=False),
        ),
    )
    tickets.append(
        pa.table(
            {
                "ticket_id": pa.array(range(9000, 9000 + len(CUSTOMERS)), pa.int64()),
                "customer_id": CUSTOMERS,
                "body": ["The video does not load."] * len(CUSTOMERS),
            }
        )
    )
    print(
        json.dumps(
            {
                "customers": CUSTOMERS,
                "rows": {
                    "crm.customers": len(CUSTOMERS),
                    "web.sessions": files * per_file,
                    "support.tickets": len(CUSTOMERS),
                },
            }
        )
    )


def holding(out_dir, name, table_name, customers):
    table = catalog(out_dir, name).load_table(table_name)
    out = {}
    for s in table.metadata.snapshots:
        t = table.scan(snapshot_id=s.snapshot_id).to_arrow()
        counts = {}
        for c in customers:
            hit = pc.equal(t["anonymous_id"], f"a-{c}")
            hit = pc.or_kleene(hit, pc.starts_with(t["session_id"], f"a-{c}#"))
            if "customer_id" in t.column_names:
                hit = pc.or_kleene(hit, pc.equal(t["customer_id"], c))
            counts[c] = pc.sum(pc.fill_null(hit, False).cast(pa.int64())).as_py() or 0
        out[str(s.snapshot_id)] = counts
    print(json.dumps(out))


def current(out_dir, name, table_name):
    t = catalog(out_dir, name).load_table(table_name).scan().to_arrow()
    ids = t["session_id"].to_pylist()
    streamed = [s for s in ids if s is not None and (s.startswith("a-W") or s.startswith("a-V"))]
    print(json.dumps({"streamed": streamed, "others": len(ids) - len(streamed)}))


def main() -> int:
    mode, out_dir, name, *rest = sys.argv[1:]
    if mode == "make":
        make(out_dir, name, int(rest[0]), int(rest[1]))
    elif mode == "holding":
        holding(out_dir, name, rest[0], rest[1:])
    elif mode == "current":
        current(out_dir, name, rest[0])
    else:
        raise SystemExit(f"unknown mode {mode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
