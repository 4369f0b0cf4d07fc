"""Compares two copies of the demo's warehouse after the erasure benchmark's two sides ran:
lethe's (A) and PyIceberg's (B), each read with PyIceberg 0.12. The benchmark fails when they
differ, so it never times an erasure that did something else.

usage: bench_compare_py.py A_CATALOG_DB A_WAREHOUSE B_CATALOG_DB B_WAREHOUSE PLAN_JSON

Every table of both catalogs is read whole (the current snapshot, deletes applied) and its rows
compared as a multiset: a count and an order-independent digest (the sum of each row's
SHA-256 modulo 2^256). A RECOMPUTE step's table is not compared: lethe rebuilds it from the
erased sources, while PyIceberg's side stands in for the rerun by rewriting the table's own
rows (bench_erase_py.py), so the two are not meant to agree there; they are listed. Prints one
JSON line; exits 1 when a compared table differs or the catalogs hold different tables.
"""
import hashlib
import json
import sys

from pyiceberg.catalog.sql import SqlCatalog

MOD = 1 << 256


def tables(catalog):
    return sorted(f"{ns[0]}.{t[-1]}" for ns in catalog.list_namespaces() for t in catalog.list_tables(ns))


def digest(table):
    """(rows, digest) of the table's current rows, in its schema's column order."""
    rows, total = 0, 0
    for batch in table.scan().to_arrow_batch_reader():
        for row in batch.to_pylist():
            h = hashlib.sha256(repr(sorted(row.items())).encode()).digest()
            total = (total + int.from_bytes(h, "big")) % MOD
            rows += 1
    return rows, format(total, "064x")


def compare(a_db, a_wh, b_db, b_wh, recompute, digest=digest):
    """Compares every table of catalog A with B's by `digest(table) -> (rows, digest)`,
    leaving out the RECOMPUTE tables; returns (differences, {table: rows} of the equal ones)."""
    a = SqlCatalog("lethe", uri=f"sqlite:///{a_db}", warehouse=f"file://{a_wh}")
    b = SqlCatalog("lethe", uri=f"sqlite:///{b_db}", warehouse=f"file://{b_wh}")
    names_a, names_b = tables(a), tables(b)
    differ, same = [], {}
    if names_a != names_b:
        differ.append({"tables": {"a": names_a, "b": names_b}})
    for name in names_a:
        if name in recompute or name not in names_b:
            continue
        ra, rb = digest(a.load_table(name)), digest(b.load_table(name))
        if ra != rb:
            differ.append({"table": name, "rows_a": ra[0], "rows_b": rb[0]})
        else:
            same[name] = ra[0]
    return differ, same


def main() -> int:
    a_db, a_wh, b_db, b_wh, plan_path = sys.argv[1:]
    with open(plan_path) as f:
        plan = json.load(f)
    recompute = sorted({s["table"] for s in plan["steps"] if s["action"] == "RECOMPUTE"})
    differ, same = compare(a_db, a_wh, b_db, b_wh, recompute)
    print(json.dumps({
        "compared": len(same) + sum(1 for d in differ if "table" in d),
        "identical": not differ,
        "differ": differ,
        "not_compared_recompute": recompute,
    }))
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
