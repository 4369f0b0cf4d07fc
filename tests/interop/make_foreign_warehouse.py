"""Writes a "bring your own warehouse" fixture with PyIceberg 0.12: a SQL catalog (SQLite) and a
local warehouse that lethe did not write, for the tests of `lethe init` and `lethe discover`.

usage: make_foreign_warehouse.py DIR CATALOG_NAME [CUSTOMERS] [SEED]

Creates DIR/catalog.db and DIR/warehouse and prints JSON: the tables with their row counts and
the subject the tests erase. Deterministic for a seed.

Tables (the column names are chosen so that some personal columns can only be found by their
values, and two identifiers only by their relation to customer_id):
- shop.customers     customer_id (CGB0000113), names, email, phone with separators, a phone
                     without separators (notify_to), a second email (alt_contact), date of birth,
                     a postcode (area), an IBAN (bank_ref), free text (about), two appends
- web.sessions       session_id "a-<customer_id>#<n>", anonymous_id "a-<customer_id>", an IP
                     column named `client`, partitioned by site (identity)
- shop.orders        order_id (UUID), customer_id, amount, card_number (Luhn-valid test numbers),
                     ship_to (a street address)
- support.tickets    visitor = anonymous_id under another name, free-text message
- ref.products       no personal data
"""
import json
import random
import sys
import uuid
from datetime import date, datetime, timedelta

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)

FIRST = ["Ada", "Bilal", "Chen", "Dora", "Emeka", "Freya", "Goran", "Hiro", "Isla", "Jonah",
         "Keira", "Luca", "Mina", "Nils", "Olga", "Pablo", "Qiu", "Rhea", "Sami", "Tess"]
LAST = ["Abbott", "Brennan", "Castell", "Dunmore", "Ekwueme", "Fairley", "Grainger", "Holt",
        "Ivers", "Jardine", "Kettering", "Lowry", "Mabry", "Nettles", "Orme", "Pryce", "Quayle",
        "Rourke", "Sallis", "Tunstall"]
STREETS = ["High Street", "Mill Lane", "Station Road", "Church Close", "Park Avenue", "Kings Way"]
TOWNS = ["Leeds", "Bristol", "Derby", "Hull", "Perth", "Bath"]
ABOUT = [
    "Prefers delivery after six in the evening, ring the bell twice.",
    "Asked us to stop sending the paper catalogue, emails are fine.",
    "Called twice about a damaged parcel and was sent a replacement.",
    "Buys for a small cafe and wants VAT invoices with every order.",
    None,
    None,
]
MESSAGES = [
    "My parcel arrived damaged, the handle of the mug is broken.",
    "Could you change the delivery address on my last order please?",
    "I was charged twice for the same order, please refund one of them.",
    "The discount code from the newsletter does not work at checkout.",
]
AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Firefox/128.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) Safari/605.1.15",
    "Mozilla/5.0 (Linux; Android 14) Chrome/126.0 Mobile",
]
PAGES = ["/", "/products", "/products/mugs", "/basket", "/checkout", "/help"]
PRODUCTS = [("P-0001", "Stoneware Mug", "kitchen", 12.5), ("P-0002", "Linen Apron", "kitchen", 24.0),
            ("P-0003", "Oak Chopping Board", "kitchen", 31.0), ("P-0004", "Wool Throw", "home", 58.0),
            ("P-0005", "Beeswax Candle", "home", 9.5), ("P-0006", "Enamel Jug", "kitchen", 19.0)]
SUBJECT = 113


def luhn_complete(digits: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return digits + str((10 - total % 10) % 10)


def card(rng: random.Random) -> str:
    body = "4" + "".join(str(rng.randrange(10)) for _ in range(14))
    n = luhn_complete(body)
    return " ".join(n[i:i + 4] for i in range(0, 16, 4))


def iban(i: int) -> str:
    bank = "NWBK"
    account = f"601613{i:08d}"
    # ISO 13616: move the country code and "00" to the end, letters to numbers, mod 97.
    numeric = "".join(str(int(c, 36)) for c in bank + account + "GB00")
    check = 98 - int(numeric) % 97
    raw = f"GB{check:02d}{bank}{account}"
    return " ".join(raw[i:i + 4] for i in range(0, len(raw), 4))


def postcode(rng: random.Random) -> str:
    area = rng.choice(["LS", "BS", "DE", "HU", "PH", "BA"])
    letters = "ABDEFGHJLNPQRSTUWXYZ"
    return f"{area}{rng.randrange(1, 20)} {rng.randrange(1, 10)}{rng.choice(letters)}{rng.choice(letters)}"


def table_from(rows, iceberg_schema):
    return pa.Table.from_pylist(rows, schema=schema_to_pyarrow(iceberg_schema))


def main() -> int:
    out_dir, name, *rest = sys.argv[1:]
    n_customers = int(rest[0]) if rest else 300
    seed = int(rest[1]) if len(rest) > 1 else 7
    rng = random.Random(seed)
    import os
    os.makedirs(f"{out_dir}/warehouse", exist_ok=True)
    catalog = SqlCatalog(name, uri=f"sqlite:///{out_dir}/catalog.db", warehouse=f"file://{out_dir}/warehouse")
    for ns in ["shop", "web", "support", "ref"]:
        catalog.create_namespace(ns)

    # shop.customers
    cust_schema = Schema(
        NestedField(1, "customer_id", StringType(), required=True),
        NestedField(2, "full_name", StringType()),
        NestedField(3, "email", StringType()),
        NestedField(4, "phone", StringType()),
        NestedField(5, "notify_to", StringType()),
        NestedField(6, "alt_contact", StringType()),
        NestedField(7, "date_of_birth", DateType()),
        NestedField(8, "area", StringType()),
        NestedField(9, "bank_ref", StringType()),
        NestedField(10, "about", StringType()),
        NestedField(11, "loyalty_tier", StringType()),
        NestedField(12, "country", StringType()),
        NestedField(13, "signed_up_at", TimestampType()),
        identifier_field_ids=[1],
    )
    customers = catalog.create_table("shop.customers", schema=cust_schema)
    start = datetime(2025, 1, 1)
    cust_rows = []
    for i in range(1, n_customers + 1):
        first = FIRST[i % len(FIRST)]
        last = LAST[(i // len(FIRST)) % len(LAST)]
        cid = f"CGB{i:07d}"
        cust_rows.append({
            "customer_id": cid,
            "full_name": f"{first} {last}-{i}" if i > len(FIRST) * len(LAST) else f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}{i}@example.com",
            "phone": f"+44 7700 9{i:05d}" if i % 2 else f"07700 9{i:05d}",
            "notify_to": f"4477009{i:05d}",
            "alt_contact": f"{last.lower()}{i}@mail.example.org" if rng.random() < 0.9 else None,
            "date_of_birth": date(1950, 1, 1) + timedelta(days=rng.randrange(0, 20000)),
            "area": postcode(rng),
            "bank_ref": iban(i),
            "about": rng.choice(ABOUT),
            "loyalty_tier": rng.choice(["bronze", "silver", "gold"]),
            "country": "GB",
            "signed_up_at": start + timedelta(minutes=rng.randrange(0, 525600)),
        })
    half = len(cust_rows) // 2
    customers.append(table_from(cust_rows[:half], cust_schema))
    customers.append(table_from(cust_rows[half:], cust_schema))

    # web.sessions, partitioned by site (identity)
    sess_schema = Schema(
        NestedField(1, "session_id", StringType(), required=True),
        NestedField(2, "anonymous_id", StringType()),
        NestedField(3, "started_at", TimestampType()),
        NestedField(4, "client", StringType()),
        NestedField(5, "user_agent", StringType()),
        NestedField(6, "pages", IntegerType()),
        NestedField(7, "landing_page", StringType()),
        NestedField(8, "site", StringType()),
    )
    spec = PartitionSpec(PartitionField(source_id=8, field_id=1000, transform=IdentityTransform(), name="site"))
    sessions = catalog.create_table("web.sessions", schema=sess_schema, partition_spec=spec)
    sess_rows = []
    for c in cust_rows:
        i = int(c["customer_id"][3:])
        k = 3 if i == SUBJECT else rng.randrange(0, 6)
        for n in range(1, k + 1):
            if rng.random() < 0.8:
                client = f"{rng.randrange(1, 224)}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
            else:
                client = f"2001:db8:{rng.randrange(0xffff):x}::{rng.randrange(1, 0xffff):x}"
            sess_rows.append({
                "session_id": f"a-{c['customer_id']}#{n}",
                "anonymous_id": f"a-{c['customer_id']}",
                "started_at": datetime(2026, 1, 1) + timedelta(minutes=rng.randrange(0, 6 * 30 * 24 * 60)),
                "client": client,
                "user_agent": rng.choice(AGENTS),
                "pages": rng.randrange(1, 30),
                "landing_page": rng.choice(PAGES),
                "site": rng.choice(["uk", "ie", "nl"]),
            })
    sessions.append(table_from(sess_rows, sess_schema))

    # shop.orders
    order_schema = Schema(
        NestedField(1, "order_id", StringType(), required=True),
        NestedField(2, "customer_id", StringType()),
        NestedField(3, "ordered_at", TimestampType()),
        NestedField(4, "amount", DoubleType()),
        NestedField(5, "currency", StringType()),
        NestedField(6, "card_number", StringType()),
        NestedField(7, "ship_to", StringType()),
        NestedField(8, "items", LongType()),
    )
    orders = catalog.create_table("shop.orders", schema=order_schema)
    order_rows = []
    for c in cust_rows:
        i = int(c["customer_id"][3:])
        k = 2 if i == SUBJECT else rng.randrange(0, 4)
        for _ in range(k):
            order_rows.append({
                "order_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "customer_id": c["customer_id"],
                "ordered_at": datetime(2026, 1, 1) + timedelta(minutes=rng.randrange(0, 200000)),
                "amount": round(rng.uniform(5, 300), 2),
                "currency": "GBP",
                "card_number": card(rng),
                "ship_to": f"{rng.randrange(1, 200)} {rng.choice(STREETS)}, {rng.choice(TOWNS)} {c['area']}",
                "items": rng.randrange(1, 5),
            })
    orders.append(table_from(order_rows, order_schema))

    # support.tickets
    ticket_schema = Schema(
        NestedField(1, "ticket_id", LongType(), required=True),
        NestedField(2, "visitor", StringType()),
        NestedField(3, "opened_at", TimestampType()),
        NestedField(4, "channel", StringType()),
        NestedField(5, "message", StringType()),
    )
    tickets = catalog.create_table("support.tickets", schema=ticket_schema)
    ticket_rows = []
    for c in cust_rows:
        i = int(c["customer_id"][3:])
        if i == SUBJECT or rng.random() < 0.3:
            ticket_rows.append({
                "ticket_id": len(ticket_rows) + 1,
                "visitor": f"a-{c['customer_id']}",
                "opened_at": datetime(2026, 2, 1) + timedelta(minutes=rng.randrange(0, 100000)),
                "channel": rng.choice(["chat", "email", "phone"]),
                "message": rng.choice(MESSAGES),
            })
    tickets.append(table_from(ticket_rows, ticket_schema))

    # ref.products
    prod_schema = Schema(
        NestedField(1, "product_id", StringType(), required=True),
        NestedField(2, "title", StringType()),
        NestedField(3, "category", StringType()),
        NestedField(4, "price", DoubleType()),
    )
    products = catalog.create_table("ref.products", schema=prod_schema)
    products.append(table_from([
        {"product_id": p, "title": t, "category": c, "price": pr} for (p, t, c, pr) in PRODUCTS
    ], prod_schema))

    print(json.dumps({
        "catalog": f"{out_dir}/catalog.db",
        "warehouse": f"{out_dir}/warehouse",
        "subject": f"CGB{SUBJECT:07d}",
        "tables": {
            "shop.customers": len(cust_rows),
            "web.sessions": len(sess_rows),
            "shop.orders": len(order_rows),
            "support.tickets": len(ticket_rows),
            "ref.products": len(PRODUCTS),
        },
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
