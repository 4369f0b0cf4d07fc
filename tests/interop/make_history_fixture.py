"""Writes issue 45's fixture with PyIceberg 0.12: tables that keep history — a tag, a branch with
snapshots of its own, and min-snapshots-to-keep = 3 on main — in a SQL catalog (SQLite) and a
local warehouse lethe did not write. Then reads it back.

usage: make_history_fixture.py make DIR CATALOG_NAME
       make_history_fixture.py bench DIR CATALOG_NAME ROWS REFS   (the benchmark's table:
                                         ROWS rows in 8 commits of main; REFS=1 adds the tag,
                                         the branch's 3 commits and min-snapshots-to-keep = 3)
       make_history_fixture.py read DIR CATALOG_NAME [TABLE...]   (every ref and every kept
                                                                  snapshot; default: the
                                                                  fixture's three tables)

`make` prints JSON: the subject, the refs and their snapshot ids, row counts. `read` prints, per
table, per ref and per kept snapshot, the rows as lists of text values (sorted), so a test can
compare them as row multisets.

Tables:
- crm.customers   customer_id (text), email, full_name
- finance.ledger  entry_id, customer_id, amount, memo; main: four snapshots (appends, one delete
                  of other rows); tag `q3_close` on the second; branch `audit` from the second
                  with three appends of its own; history.expire.min-snapshots-to-keep = 3.
                  The subject has rows in every snapshot.
- web.visits      visit_id, customer_id, page: no refs (the comparison an erasure without
                  history rewrite is measured against)
"""
import json
import sys

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import In
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

SUBJECT = "CGB0000113"
CUSTOMERS = [f"CGB{n:07d}" for n in range(100, 140)]


def catalog(out_dir: str, name: str) -> SqlCatalog:
    return SqlCatalog(
        name, uri=f"sqlite:///{out_dir}/catalog.db", warehouse=f"file://{out_dir}/warehouse"
    )


def ledger_rows(start: int, n: int) -> dict:
    ids = list(range(start, start + n))
    return {
        "entry_id": pa.array(ids, pa.int64()),
        # The subject holds every 8th entry.
        "customer_id": [SUBJECT if i % 8 == 0 else CUSTOMERS[i % len(CUSTOMERS)] for i in ids],
        "amount": pa.array([float(i % 97) * 1.5 for i in ids], pa.float64()),
        "memo": [f"entry {i}" for i in ids],
    }


def make(out_dir: str, name: str) -> dict:
    cat = catalog(out_dir, name)
    for ns in ("crm", "finance", "web"):
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
                "email": [f"{c.lower()}@ledger-example.org" for c in CUSTOMERS],
                "full_name": [f"Customer {c[-3:]}" for c in CUSTOMERS],
            }
        )
    )
    ledger = cat.create_table(
        "finance.ledger",
        Schema(
            NestedField(1, "entry_id", LongType(), required=False),
            NestedField(2, "customer_id", StringType(), required=False),
            NestedField(3, "amount", DoubleType(), required=False),
            NestedField(4, "memo", StringType(), required=False),
        ),
        properties={"history.expire.min-snapshots-to-keep": "3"},
    )
    arrow = ledger.schema().as_arrow()
    ledger.append(pa.table(ledger_rows(0, 64), schema=arrow))
    ledger.append(pa.table(ledger_rows(64, 64), schema=arrow))
    ledger = cat.load_table("finance.ledger")
    tagged = ledger.current_snapshot().snapshot_id
    ledger.manage_snapshots().create_tag(tagged, "q3_close").create_branch(tagged, "audit").commit()
    for start in (1000, 1032, 1064):
        ledger = cat.load_table("finance.ledger")
        ledger.append(pa.table(ledger_rows(start, 32), schema=arrow), branch="audit")
    ledger = cat.load_table("finance.ledger")
    ledger.append(pa.table(ledger_rows(128, 64), schema=arrow))
    ledger = cat.load_table("finance.ledger")
    # Another customer's entries deleted on main (PyIceberg rewrites the files).
    ledger.delete(In("entry_id", [129, 130, 131]))
    visits = cat.create_table(
        "web.visits",
        Schema(
            NestedField(1, "visit_id", LongType(), required=False),
            NestedField(2, "customer_id", StringType(), required=False),
            NestedField(3, "page", StringType(), required=False),
        ),
    )
    ids = list(range(0, 192))
    visits.append(
        pa.table(
            {
                "visit_id": pa.array(ids, pa.int64()),
                "customer_id": [SUBJECT if i % 8 == 0 else CUSTOMERS[i % len(CUSTOMERS)] for i in ids],
                "page": [f"/p/{i % 7}" for i in ids],
            },
            schema=visits.schema().as_arrow(),
        )
    )
    ledger = cat.load_table("finance.ledger")
    return {
        "subject": SUBJECT,
        "refs": {n: r.snapshot_id for n, r in ledger.metadata.refs.items()},
        "snapshots": [s.snapshot_id for s in ledger.metadata.snapshots],
    }


def bench(out_dir: str, name: str, rows: int, refs: bool) -> dict:
    """A larger ledger for scripts/bench_history.sh: 10,000 customers (CGB0000000..), the
    subject's share of rows as every customer's (1 in 10,000)."""
    cat = catalog(out_dir, name)
    for ns in ("crm", "finance"):
        cat.create_namespace(ns)
    n_customers = 10_000
    customers = [f"CGB{n:07d}" for n in range(n_customers)]
    c = cat.create_table(
        "crm.customers",
        Schema(
            NestedField(1, "customer_id", StringType(), required=False),
            NestedField(2, "email", StringType(), required=False),
        ),
    )
    c.append(pa.table({"customer_id": customers,
                       "email": [f"{x.lower()}@ledger-example.org" for x in customers]}))
    props = {"history.expire.min-snapshots-to-keep": "3"} if refs else {}
    ledger = cat.create_table(
        "finance.ledger",
        Schema(
            NestedField(1, "entry_id", LongType(), required=False),
            NestedField(2, "customer_id", StringType(), required=False),
            NestedField(3, "amount", DoubleType(), required=False),
            NestedField(4, "memo", StringType(), required=False),
        ),
        properties=props,
    )
    arrow = ledger.schema().as_arrow()
    per = rows // 8

    def chunk(start: int) -> pa.Table:
        ids = list(range(start, start + per))
        return pa.table({
            "entry_id": pa.array(ids, pa.int64()),
            "customer_id": [customers[(i * 7919) % n_customers] for i in ids],
            "amount": pa.array([float(i % 997) for i in ids], pa.float64()),
            "memo": [f"entry {i}" for i in ids],
        }, schema=arrow)

    for k in range(8):
        ledger = cat.load_table("finance.ledger")
        if refs and k == 2:
            tagged = ledger.current_snapshot().snapshot_id
            ledger.manage_snapshots().create_tag(tagged, "q3_close").create_branch(tagged, "audit").commit()
            for b in range(3):
                ledger = cat.load_table("finance.ledger")
                ledger.append(chunk(rows + b * per), branch="audit")
            ledger = cat.load_table("finance.ledger")
        ledger.append(chunk(k * per))
    return {"rows": rows, "refs": refs}


def read(out_dir: str, name: str, tables: list) -> dict:
    cat = catalog(out_dir, name)
    out = {}
    for table_name in tables or ("crm.customers", "finance.ledger", "web.visits"):
        table = cat.load_table(table_name)
        refs = {}
        for ref_name, ref in table.metadata.refs.items():
            refs.setdefault(ref.snapshot_id, []).append(ref_name)
        snaps = {}
        for s in table.metadata.snapshots:
            rows = table.scan(snapshot_id=s.snapshot_id).to_arrow().to_pylist()
            snaps[str(s.snapshot_id)] = {
                "refs": sorted(refs.get(s.snapshot_id, [])),
                "parent": s.parent_snapshot_id,
                "summary": {k: v for k, v in s.summary.additional_properties.items() if k.startswith("lethe.")},
                "rows": sorted([[None if v is None else str(v) for v in r.values()] for r in rows]),
            }
        out[table_name] = {
            "refs": {n: r.snapshot_id for n, r in table.metadata.refs.items()},
            "snapshots": snaps,
        }
    return out


def main() -> int:
    mode, out_dir, name, *rest = sys.argv[1:]
    if mode == "make":
        result = make(out_dir, name)
    elif mode == "bench":
        result = bench(out_dir, name, int(rest[0]), rest[1] == "1")
    else:
        result = read(out_dir, name, rest)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
