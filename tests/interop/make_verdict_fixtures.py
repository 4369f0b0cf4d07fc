"""Writes the warehouse of issue 43's verdict tests with PyIceberg 0.12: a SQL catalog (SQLite)
and a local warehouse lethe did not write, shaped so that a verdict that trusts one column is
wrong.

usage: make_verdict_fixtures.py DIR CATALOG_NAME

Creates DIR/catalog.db and DIR/warehouse and prints JSON: the subject, another customer, the
subject's email, the subject's session ids, the mention's ticket id and row counts.

Tables:
- crm.customers    customer_id (text, CGB...), email, full_name
- web.sessions     session_id "a-<customer_id>#<n>" and anonymous_id "a-<customer_id>", both
                   derived identifiers of the customer; the subject's second session has a
                   NULL anonymous_id (so only session_id addresses it), and so does one of
                   another customer's; two appends (two snapshots)
- support.tickets  ticket_id, customer_id, body: the subject's own ticket, and another
                   customer's ticket whose body quotes the subject's email (a mention)
"""
import json
import sys

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

SUBJECT = "CGB0000113"
OTHER = "CGB0000200"
CUSTOMERS = [f"CGB{n:07d}" for n in range(100, 130)] + [OTHER]


def email(c: str) -> str:
    return f"{c.lower()}.holt@mailbox-example.org"


def main() -> int:
    out_dir, name = sys.argv[1:3]
    catalog = SqlCatalog(
        name,
        uri=f"sqlite:///{out_dir}/catalog.db",
        warehouse=f"file://{out_dir}/warehouse",
    )
    for ns in ("crm", "web", "support"):
        catalog.create_namespace(ns)

    customers = catalog.create_table(
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
                "email": [email(c) for c in CUSTOMERS],
                "full_name": [f"Customer {c[-3:]} Holt" for c in CUSTOMERS],
            }
        )
    )

    sessions = catalog.create_table(
        "web.sessions",
        Schema(
            NestedField(1, "session_id", StringType(), required=False),
            NestedField(2, "anonymous_id", StringType(), required=False),
            NestedField(3, "page", StringType(), required=False),
        ),
    )
    subject_sessions = []
    for batch in (range(0, 2), range(2, 3)):
        rows = {"session_id": [], "anonymous_id": [], "page": []}
        for c in CUSTOMERS:
            for n in batch:
                sid = f"a-{c}#{n + 1}"
                # The subject's second session, and one of the other customer's, lost their
                # anonymous id: only session_id says whose they are.
                anon = None if (n == 1 and c in (SUBJECT, OTHER)) else f"a-{c}"
                rows["session_id"].append(sid)
                rows["anonymous_id"].append(anon)
                rows["page"].append(f"/course/{n}")
                if c == SUBJECT:
                    subject_sessions.append(sid)
        sessions.append(pa.table(rows, schema=sessions.schema().as_arrow()))

    tickets = catalog.create_table(
        "support.tickets",
        Schema(
            NestedField(1, "ticket_id", LongType(), required=False),
            NestedField(2, "customer_id", StringType(), required=False),
            NestedField(3, "body", StringType(), required=False),
        ),
    )
    mention_ticket = 9002
    tickets.append(
        pa.table(
            {
                "ticket_id": pa.array([9001, mention_ticket, 9003], pa.int64()),
                "customer_id": [SUBJECT, OTHER, "CGB0000101"],
                "body": [
                    "My certificate shows the wrong name.",
                    f"I share a desk with {email(SUBJECT)}; please send the invoice to them.",
                    "The video on lesson 3 does not load.",
                ],
            }
        )
    )
    print(
        json.dumps(
            {
                "subject": SUBJECT,
                "other": OTHER,
                "email": email(SUBJECT),
                "sessions": subject_sessions,
                "mention_ticket": mention_ticket,
                "rows": {
                    "crm.customers": len(CUSTOMERS),
                    "web.sessions": 3 * len(CUSTOMERS),
                    "support.tickets": 3,
                },
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
