"""PyIceberg 0.12's side of the delete benchmark: Table.delete of one learner, timed.

usage: bench_delete.py CATALOG_DB WAREHOUSE TABLE LEARNER
"""
import json
import sys
import time

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo


def main() -> int:
    db, warehouse, name, learner = sys.argv[1:]
    catalog = SqlCatalog("lethe", uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    table = catalog.load_table(name)
    rows_before = table.scan(row_filter=EqualTo("learner_id", int(learner))).to_arrow().num_rows
    start = time.perf_counter()
    table.delete(EqualTo("learner_id", int(learner)))
    seconds = time.perf_counter() - start
    print(json.dumps({"table": name, "seconds": seconds, "rows_deleted": rows_before}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
