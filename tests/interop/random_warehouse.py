"""Random warehouses for the differential test of lethe's erasure claim (issue 43 item 7), written
and checked with PyIceberg 0.12, independently of lethe.

usage: random_warehouse.py make OUT --seed S --shapes N --subjects K [--no-transforms] [--only I]
       random_warehouse.py check OUT
       random_warehouse.py self-erase OUT        (debug: erase with PyIceberg instead of lethe)

`make` writes N shapes, deterministic for the seed (shape i is drawn from `S/i` alone, so
`--only I` rebuilds one shape exactly as the full run did), each under OUT/shape-<i>/:
- catalog.db + warehouse/: a PyIceberg SqlCatalog (SQLite) named `prod`;
- gov/: lethe governance for the shape: subjects.toml, metadata.toml, and lineage/ with
  OpenLineage RunEvents (a columnLineage DIRECT/IDENTITY edge from crm.customers.customer_id
  into a copy of the ID when the shape declares that copy by lineage);
- shape.json: the subject, the root table, the IDs to erase and to keep (text), the customers'
  emails and names, each table's columns with their role, partitioning and snapshots, whether
  lethe must refuse (a tag or branch on an older snapshot, or
  history.expire.min-snapshots-to-keep = 3) and every table's metadata location at make time;
- before.json: per table, the sorted row hashes of the current snapshot's rows that address no
  erased subject.

Every shape has the subject `customer` with root table crm.customers (customer_id long or
string like C0000123, email, full_name) and 2-5 more tables, each with a random subset (two or
more) of these addressing columns, each null in some rows; the non-null ones of a row always
address the same customer (rows with all of them null address nobody):
- customer_id: the ID under the root's name (lethe seeds it by name);
- a copy of the ID under another name (buyer_ref, ...): addressing through metadata.toml
  (`identifies = "customer"`) or through a lineage IDENTITY edge;
- anonymous_id = "a-<id>" (derived, pattern a-{id}); session_id = "a-<id>#<n>" (a-{id}#*);
- email_sha256 = hex SHA-256 of the email (derived from email, transform sha256) and
  id_md5 = hex MD5 of the ID's text (derived from customer_id, transform md5); left out with
  --no-transforms.
Plus non-addressing columns (row_id, amount, category, note, qty), a partitioning (none,
identity(category), bucket(qty), bucket(customer_id) when it is a long), 2-4 appends and
sometimes a PyIceberg delete of rows of kept customers or of nobody.

`check` reads every shape back: for every snapshot in every table's metadata, no row may address
an erased customer (matching written here: IDs compared as text, the patterns, recomputed
hashes); the current snapshot's rows addressing no erased customer must be before.json's
multiset; for a shape where lethe must refuse, every table's metadata location must be the one
recorded at make time. Prints JSON and exits 1 on any failure.
"""
import hashlib
import json
import os
import random
import struct
import sys

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import In
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, IdentityTransform
from pyiceberg.types import DoubleType, IntegerType, LongType, NestedField, StringType

SUBJECT = "customer"
ROOT = "crm.customers"
CATALOG = "prod"
FIRST = ["Ada", "Bilal", "Chen", "Dora", "Emeka", "Freya", "Goran", "Hiro", "Isla", "Jonah",
         "Keira", "Luca", "Mina", "Nils", "Olga", "Pablo"]
LAST = ["Abbott", "Brennan", "Castell", "Dunmore", "Fairley", "Grainger", "Holt", "Ivers",
        "Lowry", "Mabry", "Pryce", "Rourke"]
TABLES = [("shop", "orders"), ("web", "sessions"), ("support", "tickets"), ("mkt", "events"),
          ("fin", "invoices"), ("app", "devices"), ("crm", "contacts")]
COPY_NAMES = ["buyer_ref", "client_ref", "account_no", "member_key"]
CATEGORIES = ["books", "garden", "kitchen", "toys", "travel"]
NOTES = ["left at the door", "called back twice", "asked for an invoice", "gift wrap",
         "priority", "", "refund pending", "new address"]
# Roles of addressing columns (shape.json): how `check` matches them.
ID_ROLES = {"id", "copy"}


# --- bucket partitions without pyiceberg-core -----------------------------------------------
# PyIceberg 0.12 computes bucket partition values for writes only through pyiceberg-core, which
# the venv doesn't have. The Iceberg spec's bucket function is small: Murmur3 x86 32-bit (seed 0)
# of the value's 8-byte little-endian form for int and long, `(hash & 0x7fffffff) % N`.

def murmur3_32(data: bytes, seed: int = 0) -> int:
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & 0xFFFFFFFF
    n = len(data) // 4 * 4
    for i in range(0, n, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    tail = data[n:]
    k = 0
    for i, b in enumerate(tail):
        k |= b << (8 * i)
    if tail:
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


# The spec's example: hash(34L) = 2017239379.
assert murmur3_32(struct.pack("<q", 34)) == 2017239379


def _bucket_pyarrow_transform(self, source):
    n = self.num_buckets

    def f(arr):
        return pa.array(
            [None if v is None else (murmur3_32(struct.pack("<q", v)) & 0x7FFFFFFF) % n
             for v in arr.to_pylist()],
            type=pa.int32(),
        )
    return f


BucketTransform.pyarrow_transform = _bucket_pyarrow_transform


# --- helpers --------------------------------------------------------------------------------

def sha256(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def md5(s: str) -> str:
    return hashlib.md5(s.encode()).hexdigest()


def catalog_of(shape_dir: str) -> SqlCatalog:
    return SqlCatalog(CATALOG, uri=f"sqlite:///{shape_dir}/catalog.db",
                      warehouse=f"file://{shape_dir}/warehouse")


def row_hash(row: dict) -> str:
    return sha256(json.dumps(row, sort_keys=True, default=str))


def rows_of(table, snapshot_id=None) -> list:
    scan = table.scan(snapshot_id=snapshot_id) if snapshot_id is not None else table.scan()
    return scan.to_arrow().to_pylist()


def addressing(columns: dict) -> dict:
    """The addressing columns of a table description: column -> role."""
    return {c: r for c, r in columns.items() if r in ID_ROLES or r in
            ("email", "anonymous_id", "session_id", "email_sha256", "id_md5")}


class Matcher:
    """Which erased customer a value addresses, by role; written from the shape's description
    alone (never from lethe's governance parser)."""

    def __init__(self, shape: dict):
        erase = shape["erase"]
        emails = {c: shape["customers"][c]["email"] for c in erase}
        self.ids = set(erase)
        self.emails = set(emails.values())
        self.anonymous = {f"a-{i}" for i in erase}
        self.session_prefixes = tuple(f"a-{i}#" for i in erase)
        self.email_hashes = {sha256(e) for e in emails.values()}
        self.id_hashes = {md5(i) for i in erase}

    def hits(self, role: str, v) -> bool:
        if v is None:
            return False
        if role in ID_ROLES:
            return str(v) in self.ids
        if role == "email":
            return v in self.emails
        if role == "anonymous_id":
            return v in self.anonymous
        if role == "session_id":
            return v.startswith(self.session_prefixes)
        if role == "email_sha256":
            return v in self.email_hashes
        if role == "id_md5":
            return v in self.id_hashes
        raise ValueError(role)

    def addresses(self, cols: dict, row: dict) -> bool:
        return any(self.hits(r, row[c]) for c, r in cols.items())


# --- make -----------------------------------------------------------------------------------

def draw_ids(rng: random.Random, k: int, id_type: str) -> list:
    """k distinct IDs as text; long IDs are often decimal prefixes of one another (11, 113) so
    that a pattern or a prefix match that forgets its literal text selects the wrong customer."""
    nums = []
    while len(nums) < k:
        if nums and rng.random() < 0.35:
            n = rng.choice(nums) * 10 + rng.randrange(10)
        else:
            n = rng.randrange(1, 2000)
        if n not in nums and n < 10 ** 7:
            nums.append(n)
    return [str(n) if id_type == "long" else f"C{n:07d}" for n in nums]


def toml_str(s: str) -> str:
    return json.dumps(s)


def lineage_event(table: str, column: str, n: int) -> dict:
    p = "https://example.invalid/random_warehouse"
    ns = "iceberg://prod"
    return {
        "eventType": "COMPLETE",
        "eventTime": f"2026-01-01T00:{n:02d}:00Z",
        "producer": p,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": f"01950000-0000-7000-8000-{n:012d}"},
        "job": {"namespace": "etl", "name": f"load_{table}"},
        "inputs": [{"namespace": ns, "name": ROOT}],
        "outputs": [{
            "namespace": ns,
            "name": table,
            "facets": {"columnLineage": {
                "_producer": p,
                "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet",
                "fields": {column: {"inputFields": [{
                    "namespace": ns, "name": ROOT, "field": "customer_id",
                    "transformations": [{"type": "DIRECT", "subtype": "IDENTITY",
                                         "description": "", "masking": False}],
                }]}},
            }},
        }],
    }


def split_appends(rng: random.Random, rows: list, n: int) -> list:
    rows = rows[:]
    rng.shuffle(rows)
    cuts = sorted(rng.sample(range(1, len(rows)), min(n - 1, len(rows) - 1))) if len(rows) > 1 else []
    out, last = [], 0
    for c in cuts + [len(rows)]:
        out.append(rows[last:c])
        last = c
    return [p for p in out if p]


def make_shape(shape_dir: str, seed: int, i: int, k: int, transforms: bool) -> None:
    rng = random.Random(f"{seed}/{i}")
    os.makedirs(f"{shape_dir}/warehouse", exist_ok=True)
    os.makedirs(f"{shape_dir}/gov/lineage", exist_ok=True)
    cat = catalog_of(shape_dir)
    id_type = rng.choice(["long", "string"])
    id_iceberg = LongType() if id_type == "long" else StringType()
    ids = draw_ids(rng, k, id_type)
    erase = sorted(rng.sample(ids, max(1, k // 2 + rng.choice([-1, 0, 0, 1]))))
    keep = sorted(set(ids) - set(erase))

    def id_value(t: str):
        return int(t) if id_type == "long" else t

    customers = {}
    for n, c in enumerate(ids):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        customers[c] = {"email": f"{first.lower()}.{last.lower()}.{n}{rng.randrange(100)}@example.com",
                        "full_name": f"{first} {last}"}

    tables = {}
    namespaces = {"crm"}
    cat.create_namespace("crm")
    # Root.
    root_schema = Schema(
        NestedField(1, "customer_id", id_iceberg, required=True),
        NestedField(2, "email", StringType()),
        NestedField(3, "full_name", StringType()),
    )
    root = cat.create_table(ROOT, schema=root_schema)
    root_rows = [{"customer_id": id_value(c), **customers[c]} for c in ids]
    for part in split_appends(rng, root_rows, rng.randint(1, 3)):
        root.append(pa.Table.from_pylist(part, schema=root.schema().as_arrow()))
    tables[ROOT] = {"columns": {"customer_id": "id", "email": "email", "full_name": "value"},
                    "partition": "none"}

    metadata = [f'[tables."{ROOT}".columns]',
                'customer_id = { classification = "personal", identifies = "customer" }',
                'email = "personal"', 'full_name = "personal"', ""]
    lineage_n = 0
    candidates = ["customer_id", "copy", "anonymous_id", "session_id"]
    if transforms:
        candidates += ["email_sha256", "id_md5"]
    row_id = 0
    for ns, name in rng.sample(TABLES, rng.randint(2, 5)):
        tname = f"{ns}.{name}"
        if ns not in namespaces:
            cat.create_namespace(ns)
            namespaces.add(ns)
        chosen = rng.sample(candidates, rng.randint(2, len(candidates)))
        chosen = [c for c in candidates if c in chosen]  # a stable column order
        copy_name = rng.choice(COPY_NAMES)
        copy_via = rng.choice(["metadata", "lineage"])
        cols = {"row_id": "key"}
        fields = [NestedField(1, "row_id", LongType(), required=True)]
        for c in chosen:
            col = copy_name if c == "copy" else c
            role = "copy" if c == "copy" else ("id" if c == "customer_id" else c)
            cols[col] = role
            ty = id_iceberg if c in ("customer_id", "copy") else StringType()
            fields.append(NestedField(len(fields) + 1, col, ty))
        for col, ty in [("amount", DoubleType()), ("category", StringType()), ("note", StringType()),
                        ("qty", IntegerType())]:
            cols[col] = "data"
            fields.append(NestedField(len(fields) + 1, col, ty))
        schema = Schema(*fields)
        kinds = ["none", "identity(category)", "bucket(qty)"]
        if id_type == "long" and "customer_id" in cols:
            kinds.append("bucket(customer_id)")
        kind = rng.choice(kinds)
        field_id = {f.name: f.field_id for f in fields}
        if kind == "identity(category)":
            spec = PartitionSpec(PartitionField(field_id["category"], 1000, IdentityTransform(), "category"))
        elif kind == "bucket(qty)":
            spec = PartitionSpec(PartitionField(field_id["qty"], 1000, BucketTransform(4), "qty_bucket"))
        elif kind == "bucket(customer_id)":
            spec = PartitionSpec(PartitionField(field_id["customer_id"], 1000, BucketTransform(4), "customer_bucket"))
        else:
            spec = PartitionSpec()
        table = cat.create_table(tname, schema=schema, partition_spec=spec)

        # Rows: 0-3 per customer, each addressing column null with probability 0.35; plus rows
        # of nobody (every addressing column null).
        rows, owner = [], {}
        addr = [c for c, r in cols.items() if r not in ("key", "data")]

        def data(r):
            r.update({"amount": round(rng.uniform(1, 500), 2), "category": rng.choice(CATEGORIES),
                      "note": rng.choice(NOTES), "qty": rng.randrange(1, 10)})
            return r

        for c in ids:
            for _ in range(rng.randint(0, 3)):
                row_id += 1
                r = {"row_id": row_id}
                for col in addr:
                    role = cols[col]
                    if rng.random() < 0.35:
                        r[col] = None
                    elif role in ID_ROLES:
                        r[col] = id_value(c)
                    elif role == "anonymous_id":
                        r[col] = f"a-{c}"
                    elif role == "session_id":
                        r[col] = f"a-{c}#{rng.randint(1, 12)}"
                    elif role == "email_sha256":
                        r[col] = sha256(customers[c]["email"])
                    elif role == "id_md5":
                        r[col] = md5(c)
                rows.append(data(r))
                owner[row_id] = c
        for _ in range(rng.randint(1, 3)):
            row_id += 1
            rows.append(data({"row_id": row_id, **{col: None for col in addr}}))
            owner[row_id] = None
        appends = split_appends(rng, rows, rng.randint(2, 4))
        for part in appends:
            table.append(pa.Table.from_pylist(part, schema=table.schema().as_arrow()))
        deleted = []
        if rng.random() < 0.4:
            others = [r["row_id"] for r in rows if owner[r["row_id"]] not in erase]
            if others:
                deleted = rng.sample(others, min(len(others), rng.randint(1, 3)))
                table.delete(In("row_id", deleted))

        # Governance.
        lines = [f'[tables."{tname}".columns]']
        for col, role in cols.items():
            derived = {
                "anonymous_id": 'from = "customer_id", pattern = "a-{id}"',
                "session_id": 'from = "customer_id", pattern = "a-{id}#*"',
                "email_sha256": 'from = "email", transform = "sha256"',
                "id_md5": 'from = "customer_id", transform = "md5"',
            }.get(role)
            if derived:
                lines.append(f'{col} = {{ classification = "personal", identifies = "customer", derived = {{ {derived} }} }}')
            elif role == "copy" and copy_via == "metadata":
                lines.append(f'{col} = {{ classification = "personal", identifies = "customer" }}')
            elif role == "copy":
                lines.append(f'{col} = "personal"')
                lineage_n += 1
                with open(f"{shape_dir}/gov/lineage/{tname}.json", "w") as f:
                    json.dump(lineage_event(tname, col, lineage_n), f, indent=1)
            elif col == "note":
                lines.append(f'{col} = "personal"')
        metadata += lines + [""]
        tables[tname] = {
            "columns": cols,
            "partition": kind,
            "copy_via": copy_via if "copy" in cols.values() else None,
            "appends": len(appends),
            "deleted_rows": len(deleted),
        }

    # A setting that keeps history (1 in 4 shapes): half of them lethe must refuse, the other
    # half retention.toml tells lethe to rewrite (a twin of every kept snapshot).
    refuse = None
    rewrite = None
    if rng.random() < 1 / 4:
        kind = rng.choice(["tag", "branch", "min-snapshots-to-keep"])
        tname = rng.choice([t for t in tables if len(cat.load_table(t).metadata.snapshots) > 1])
        t = cat.load_table(tname)
        older = t.metadata.snapshots[0].snapshot_id
        if kind == "tag":
            t.manage_snapshots().create_tag(older, "audit-2025").commit()
        elif kind == "branch":
            t.manage_snapshots().create_branch(older, "backfill").commit()
        else:
            with t.transaction() as tx:
                tx.set_properties({"history.expire.min-snapshots-to-keep": "3"})
        refuse = {"kind": kind, "table": tname}
        if rng.random() < 0.5:
            rewrite, refuse = refuse, None
            with open(f"{shape_dir}/gov/retention.toml", "w") as f:
                f.write(f'[snapshots.tables."{tname}"]\nhistory = "rewrite"\n'
                        'reason = "the history is reproduced from its refs"\n')

    with open(f"{shape_dir}/gov/subjects.toml", "w") as f:
        f.write(f'[{SUBJECT}]\nidentifiers = ["{ROOT}.customer_id"]\n'
                f'mapped = [{{ column = "email", via = "{ROOT}" }}]\n'
                'values = ["email", "full_name"]\n')
    with open(f"{shape_dir}/gov/metadata.toml", "w") as f:
        f.write("\n".join(metadata))

    shape = {
        "shape": i,
        "seed": seed,
        "subject": SUBJECT,
        "root": ROOT,
        "id_type": id_type,
        "erase": erase,
        "keep": keep,
        "customers": customers,
        "refuse": refuse,
        "rewrite": rewrite,
        "tables": tables,
        "metadata_locations": {t: cat.load_table(t).metadata_location for t in tables},
        "snapshots": {t: len(cat.load_table(t).metadata.snapshots) for t in tables},
    }
    m = Matcher(shape)
    before = {}
    for t, desc in tables.items():
        cols = addressing(desc["columns"])
        before[t] = sorted(row_hash(r) for r in rows_of(cat.load_table(t)) if not m.addresses(cols, r))
    # A rewritten table's refs: each must still read its rows but the erased customers'.
    if rewrite:
        t = rewrite["table"]
        table = cat.load_table(t)
        cols = addressing(tables[t]["columns"])
        before["refs"] = {
            name: sorted(row_hash(r) for r in rows_of(table, ref.snapshot_id)
                         if not m.addresses(cols, r))
            for name, ref in table.metadata.refs.items()
        }
    with open(f"{shape_dir}/shape.json", "w") as f:
        json.dump(shape, f, indent=1, sort_keys=True)
    with open(f"{shape_dir}/before.json", "w") as f:
        json.dump(before, f)
    cat.engine.dispose()


def shape_dirs(out: str) -> list:
    names = [d for d in os.listdir(out) if d.startswith("shape-")]
    return [os.path.join(out, d) for d in sorted(names, key=lambda d: int(d[6:]))]


# --- check ----------------------------------------------------------------------------------

def check_shape(shape_dir: str) -> dict:
    with open(f"{shape_dir}/shape.json") as f:
        shape = json.load(f)
    with open(f"{shape_dir}/before.json") as f:
        before = json.load(f)
    cat = catalog_of(shape_dir)
    failures = []
    snapshots_read = 0
    if shape["refuse"]:
        for t, loc in shape["metadata_locations"].items():
            now = cat.load_table(t).metadata_location
            if now != loc:
                failures.append({"table": t, "kind": "changed although lethe had to refuse",
                                 "before": loc, "after": now})
    else:
        m = Matcher(shape)
        for t, desc in shape["tables"].items():
            table = cat.load_table(t)
            cols = addressing(desc["columns"])
            for snap in table.metadata.snapshots:
                try:
                    rows = rows_of(table, snap.snapshot_id)
                except Exception as e:  # a snapshot that can't be read can't be shown clean
                    failures.append({"table": t, "snapshot": snap.snapshot_id, "kind": "unreadable",
                                     "error": f"{type(e).__name__}: {e}"[:300]})
                    continue
                snapshots_read += 1
                for c, role in cols.items():
                    hits = [r for r in rows if m.hits(role, r[c])]
                    if hits:
                        failures.append({
                            "table": t, "snapshot": snap.snapshot_id,
                            "current": snap.snapshot_id == table.metadata.current_snapshot_id,
                            "column": c, "role": role, "count": len(hits),
                            "ids": sorted({str(h[c]) for h in hits}),
                            # the other addressing columns of those rows: null or not
                            "others_null": sorted({
                                ",".join(o for o in cols if o != c and h[o] is None) or "-"
                                for h in hits}),
                        })
            if shape.get("rewrite") and shape["rewrite"]["table"] == t:
                for name, want in before["refs"].items():
                    ref = table.metadata.refs.get(name)
                    got = None if ref is None else sorted(
                        row_hash(r) for r in rows_of(table, ref.snapshot_id)
                        if not m.addresses(cols, r))
                    if got != want:
                        failures.append({"table": t, "kind": f"ref {name} lost rows or is gone",
                                         "rows_before": len(want),
                                         "rows_now": None if got is None else len(got)})
            now = sorted(row_hash(r) for r in rows_of(table) if not m.addresses(cols, r))
            if now != before[t]:
                was, got = set(before[t]), set(now)
                failures.append({"table": t, "kind": "other rows changed",
                                 "rows_before": len(before[t]), "rows_now": len(now),
                                 "missing": len(was - got), "unexpected": len(got - was)})
    cat.engine.dispose()
    return {"shape": shape["shape"], "dir": shape_dir, "ok": not failures,
            "refuse": shape["refuse"], "rewrite": shape.get("rewrite"),
            "snapshots_read": snapshots_read, "failures": failures}


# --- self-erase (debug) ---------------------------------------------------------------------

def self_erase_shape(shape_dir: str) -> None:
    """Erases the shape's customers with PyIceberg (rewrite without their rows, expire every
    other snapshot): `check` must then pass. Shapes where lethe must refuse are left alone."""
    with open(f"{shape_dir}/shape.json") as f:
        shape = json.load(f)
    if shape["refuse"]:
        return
    cat = catalog_of(shape_dir)
    m = Matcher(shape)
    for t, desc in shape["tables"].items():
        table = cat.load_table(t)
        cols = addressing(desc["columns"])
        rows = rows_of(table)
        kept = [r for r in rows if not m.addresses(cols, r)]
        if len(kept) != len(rows):
            table.overwrite(pa.Table.from_pylist(kept, schema=table.schema().as_arrow()))
        table = cat.load_table(t)
        old = [s.snapshot_id for s in table.metadata.snapshots
               if s.snapshot_id != table.metadata.current_snapshot_id]
        if old:
            table.maintenance.expire_snapshots().by_ids(old).commit()
    cat.engine.dispose()


def main(argv: list) -> int:
    if len(argv) < 2 or argv[0] not in ("make", "check", "self-erase"):
        print(__doc__, file=sys.stderr)
        return 2
    cmd, out = argv[0], argv[1]
    if cmd == "make":
        opts = {"--seed": None, "--shapes": "24", "--subjects": "8", "--only": None}
        transforms = True
        rest = argv[2:]
        while rest:
            a = rest.pop(0)
            if a == "--no-transforms":
                transforms = False
            elif a in opts and rest:
                opts[a] = rest.pop(0)
            else:
                print(f"unknown argument {a}\n{__doc__}", file=sys.stderr)
                return 2
        if opts["--seed"] is None:
            print("--seed is required", file=sys.stderr)
            return 2
        seed, n, k = int(opts["--seed"]), int(opts["--shapes"]), int(opts["--subjects"])
        if k < 4:
            print("--subjects must be at least 4", file=sys.stderr)
            return 2
        which = range(n) if opts["--only"] is None else [int(opts["--only"])]
        for i in which:
            make_shape(os.path.abspath(os.path.join(out, f"shape-{i}")), seed, i, k, transforms)
        print(json.dumps({"seed": seed, "shapes": len(which), "subjects": k, "transforms": transforms}))
        return 0
    if cmd == "self-erase":
        for d in shape_dirs(out):
            self_erase_shape(d)
        return 0
    results = [check_shape(d) for d in shape_dirs(out)]
    failed = [r for r in results if not r["ok"]]
    print(json.dumps({
        "ok": not failed and bool(results),
        "shapes": len(results),
        "refusing": sum(1 for r in results if r["refuse"]),
        "rewriting": sum(1 for r in results if r.get("rewrite")),
        "snapshots_read": sum(r["snapshots_read"] for r in results),
        "failed": [r["shape"] for r in failed],
        "results": results,
    }, indent=1))
    return 0 if results and not failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
