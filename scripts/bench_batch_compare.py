"""Compares two copies of the demo's warehouse after the batch benchmark's two sides ran: lethe's
(A) and Spark's (B), each read with PyIceberg 0.12. The benchmark fails when they differ, so it
never times an erasure that did something else.

usage: bench_batch_compare.py A_CATALOG_DB A_WAREHOUSE B_CATALOG_DB B_WAREHOUSE DRY_RUN_JSON

Every table of both catalogs is read (the current snapshot, deletes applied) in batches, and its
rows compared as a multiset: the row count and an order-independent digest, the sum modulo 2^64
of each row's 64-bit hash (Polars' `hash_rows` with a fixed seed, over the columns in the
schema's order; the same Polars on both sides). Row-by-row Python hashing, as
bench_compare_py.py does, takes hours at 150 million rows. A RECOMPUTE step's table is not
compared (lethe reruns the pipeline, Spark's side stands in for it by rewriting the table's own
rows); it is listed. The comparison is bench_compare_py.py's, with this digest. Prints one
JSON line; exits 3 when a compared table differs or the catalogs hold different tables (1 is an
error of the script itself).
"""
import json
import sys

import polars as pl

from bench_compare_py import compare  # this folder: the table-by-table comparison

MASK = (1 << 64) - 1
SEEDS = dict(seed=7)


def digest(table):
    """(rows, digest) of the table's current rows."""
    rows, total = 0, 0
    for batch in table.scan().to_arrow_batch_reader():
        if batch.num_rows == 0:
            continue
        h = pl.from_arrow(batch).hash_rows(**SEEDS)
        lo = (h % (1 << 32)).sum()
        hi = (h // (1 << 32)).sum()
        total = (total + lo + (hi << 32)) & MASK
        rows += batch.num_rows
    return rows, format(total, "016x")


def main() -> int:
    a_db, a_wh, b_db, b_wh, dry_path = sys.argv[1:]
    with open(dry_path) as f:
        steps = json.load(f)["journal"]["steps"]
    recompute = sorted({s["table"] for s in steps if s["action"] == "RECOMPUTE"})
    differ, same = compare(a_db, a_wh, b_db, b_wh, recompute, digest)
    print(json.dumps({
        "compared": len(same),
        "rows": same,
        "identical": not differ,
        "differ": differ,
        "not_compared_recompute": recompute,
    }))
    return 0 if not differ else 3


if __name__ == "__main__":
    sys.exit(main())
