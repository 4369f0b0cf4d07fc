"""Writes a warehouse with nested personal data with PyIceberg 0.12: a SQL catalog (SQLite) and a
local warehouse that lethe did not write, for the tests of nested paths (issue 20).

usage: make_nested_warehouse.py DIR CATALOG_NAME [PATIENTS] [SEED]

Creates DIR/catalog.db and DIR/warehouse and prints JSON: the tables with their row counts, the
two subjects the tests erase (UUID string IDs), the street of the second one's first address,
and the visits whose notes mention the second subject's email. Deterministic for a seed.

Tables:
- registry.patients  patient_id (UUID string), full_name, contact struct<email, phone, preferred>,
                     addresses list<struct<street, city>>, attributes map<string, string> (an
                     NHS-style number and a next of kin), registered_on; two appends
- registry.visits    visit_id (UUID string), patient_id, visited_at,
                     details struct<reason, notes>, clinic; two other patients' visits have
                     notes that give the second subject's email
- registry.referrals referral_id, referred struct<patient_id, by> (the patient's ID only in a
                     struct field), made_on; one referral of each subject
- billing.claims     claim_id, patient_id, amount, addresses and attributes as the patient's at
                     the time of the claim, submitted_on (kept under a legal exception: the tests null the
                     street and the attribute values)
"""
import json
import os
import random
import sys
import uuid
from datetime import date, datetime, timedelta

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DateType,
    DoubleType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
)

FIRST = ["Aoife", "Bram", "Cosima", "Dev", "Elif", "Fintan", "Gwen", "Hamid", "Ines", "Jarek",
         "Kaia", "Lorcan", "Maren", "Nuno", "Orla", "Piet", "Rosa", "Soren", "Tilde", "Umar"]
LAST = ["Ashworth", "Byrne", "Caddick", "Dalgleish", "Eustace", "Farrow", "Gillam", "Hebden",
        "Iqbal", "Jessop", "Kinsella", "Lomax", "Mcrae", "Norcross", "Oakes", "Pendle"]
STREETS = ["Quarry Lane", "Tanners Row", "Foundry Street", "Weavers Walk", "Lock Road",
           "Chapel Fold", "Orchard Rise", "Beacon Hill"]
CITIES = ["Halifax", "Skipton", "Settle", "Keswick", "Malton", "Whitby"]
REASONS = ["annual check-up", "follow-up", "vaccination", "blood test", "referral"]
NOTES = [
    "Patient reports mild symptoms, advised rest and fluids.",
    "Results normal; next review in twelve months.",
    "Discussed diet and exercise; leaflet given.",
    None,
]
CLINICS = ["north", "south", "east"]
# Next of kin: first names no patient has, so that no value of one patient is another's.
KIN = ["Wren", "Yusuf", "Zelda", "Xavi", "Vera", "Quinn"]


def addresses_schema(first_id):
    return ListType(
        element_id=first_id,
        element_type=StructType(
            NestedField(first_id + 1, "street", StringType()),
            NestedField(first_id + 2, "city", StringType()),
        ),
        element_required=False,
    )


def attributes_schema(first_id):
    return MapType(
        key_id=first_id,
        key_type=StringType(),
        value_id=first_id + 1,
        value_type=StringType(),
        value_required=False,
    )


def table_from(rows, iceberg_schema):
    # The table's own schema: PyIceberg assigns fresh field ids when it creates a table.
    return pa.Table.from_pylist(rows, schema=schema_to_pyarrow(iceberg_schema))


def main() -> int:
    out_dir, name, *rest = sys.argv[1:]
    n = int(rest[0]) if rest else 120
    seed = int(rest[1]) if len(rest) > 1 else 11
    rng = random.Random(seed)
    os.makedirs(f"{out_dir}/warehouse", exist_ok=True)
    catalog = SqlCatalog(name, uri=f"sqlite:///{out_dir}/catalog.db", warehouse=f"file://{out_dir}/warehouse")
    for ns in ["registry", "billing"]:
        catalog.create_namespace(ns)

    patient_schema = Schema(
        NestedField(1, "patient_id", StringType(), required=True),
        NestedField(2, "full_name", StringType()),
        NestedField(3, "contact", StructType(
            NestedField(7, "email", StringType()),
            NestedField(8, "phone", StringType()),
            NestedField(9, "preferred", StringType()),
        )),
        NestedField(4, "addresses", addresses_schema(10)),
        NestedField(5, "attributes", attributes_schema(13)),
        NestedField(6, "registered_on", DateType()),
    )
    patients = catalog.create_table("registry.patients", schema=patient_schema)
    rows = []
    for i in range(n):
        first = FIRST[i % len(FIRST)]
        last = LAST[(i // len(FIRST)) % len(LAST)]
        k = 1 + i % 3
        rows.append({
            "patient_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "full_name": f"{first} {last}",
            "contact": {
                "email": f"{first.lower()}.{last.lower()}.{i}@clinic-mail.example",
                "phone": f"+44 1632 96{i:04d}",
                "preferred": rng.choice(["email", "phone", "post"]),
            },
            "addresses": [
                # Four-digit house numbers, distinct: no street is part of another.
                {"street": f"{1000 + i * 3 + j} {STREETS[(i + j) % len(STREETS)]}",
                 "city": CITIES[(i + j) % len(CITIES)]}
                for j in range(k)
            ],
            "attributes": [
                ("nhs_number", f"{400 + i:03d} {rng.randrange(100, 999)} {rng.randrange(1000, 9999)}"),
                ("next_of_kin", f"{KIN[i % len(KIN)]}-{i} {last}"),
            ],
            "registered_on": date(2020, 1, 1) + timedelta(days=rng.randrange(0, 1800)),
        })
    half = len(rows) // 2
    patients.append(table_from(rows[:half], patients.schema()))
    patients.append(table_from(rows[half:], patients.schema()))
    # The subjects: one in each file.
    first_subject = rows[3]
    second_subject = rows[half + 4]

    visit_schema = Schema(
        NestedField(1, "visit_id", StringType(), required=True),
        NestedField(2, "patient_id", StringType()),
        NestedField(3, "visited_at", TimestampType()),
        NestedField(4, "details", StructType(
            NestedField(6, "reason", StringType()),
            NestedField(7, "notes", StringType()),
        )),
        NestedField(5, "clinic", StringType()),
    )
    visits = catalog.create_table("registry.visits", schema=visit_schema)
    visit_rows = []
    mentions = []
    for r in rows:
        k = 2 if r in (first_subject, second_subject) else rng.randrange(0, 4)
        for _ in range(k):
            visit_rows.append({
                "visit_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "patient_id": r["patient_id"],
                "visited_at": datetime(2025, 1, 1) + timedelta(minutes=rng.randrange(0, 500000)),
                "details": {"reason": rng.choice(REASONS), "notes": rng.choice(NOTES)},
                "clinic": rng.choice(CLINICS),
            })
    # Two other patients' notes give the second subject's email (a carer, a referral).
    email = second_subject["contact"]["email"]
    for r, text in [(rows[10], f"Carer to be copied on letters: {email}."),
                    (rows[half + 20], f"Referred by a relative, contact {email.upper()} for history.")]:
        v = {
            "visit_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "patient_id": r["patient_id"],
            "visited_at": datetime(2025, 6, 1) + timedelta(minutes=rng.randrange(0, 5000)),
            "details": {"reason": "referral", "notes": text},
            "clinic": "north",
        }
        visit_rows.append(v)
        mentions.append(v["visit_id"])
    visits.append(table_from(visit_rows, visits.schema()))

    claim_schema = Schema(
        NestedField(1, "claim_id", LongType(), required=True),
        NestedField(2, "patient_id", StringType()),
        NestedField(3, "amount", DoubleType()),
        NestedField(4, "addresses", addresses_schema(6)),
        NestedField(5, "attributes", attributes_schema(9)),
        NestedField(11, "submitted_on", DateType()),
    )
    claims = catalog.create_table("billing.claims", schema=claim_schema)
    claim_rows = []
    for r in rows:
        k = 2 if r in (first_subject, second_subject) else rng.randrange(0, 2)
        for _ in range(k):
            claim_rows.append({
                "claim_id": len(claim_rows) + 1,
                "patient_id": r["patient_id"],
                "amount": round(rng.uniform(20, 900), 2),
                "addresses": r["addresses"],
                "attributes": r["attributes"],
                "submitted_on": date(2025, 1, 1) + timedelta(days=rng.randrange(0, 300)),
            })
    claims.append(table_from(claim_rows, claims.schema()))

    referral_schema = Schema(
        NestedField(1, "referral_id", LongType(), required=True),
        NestedField(2, "referred", StructType(
            NestedField(4, "patient_id", StringType()),
            NestedField(5, "by", StringType()),
        )),
        NestedField(3, "made_on", DateType()),
    )
    referrals = catalog.create_table("registry.referrals", schema=referral_schema)
    referral_rows = []
    for r in rows:
        if r in (first_subject, second_subject) or rng.random() < 0.3:
            referral_rows.append({
                "referral_id": len(referral_rows) + 1,
                "referred": {"patient_id": r["patient_id"], "by": rng.choice(["gp", "a&e", "self"])},
                "made_on": date(2024, 1, 1) + timedelta(days=rng.randrange(0, 700)),
            })
    referrals.append(table_from(referral_rows, referrals.schema()))

    def claims_of(s):
        return sum(1 for c in claim_rows if c["patient_id"] == s["patient_id"])

    def visits_of(s):
        return sum(1 for v in visit_rows if v["patient_id"] == s["patient_id"])

    print(json.dumps({
        "catalog": f"{out_dir}/catalog.db",
        "warehouse": f"{out_dir}/warehouse",
        "subjects": [first_subject["patient_id"], second_subject["patient_id"]],
        "visits_of": [visits_of(first_subject), visits_of(second_subject)],
        "claims_of": [claims_of(first_subject), claims_of(second_subject)],
        "addresses_of_second": len(second_subject["addresses"]),
        "mentions": mentions,
        "tables": {
            "registry.patients": len(rows),
            "registry.visits": len(visit_rows),
            "billing.claims": len(claim_rows),
            "registry.referrals": len(referral_rows),
        },
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
