"""Another writer committing beside lethe: appends sessions to a table with PyIceberg 0.12 every
50-300 ms and now and then deletes some of the rows it appended, retrying a commit that lost a
race the way its users do (reload the table, do it again), until a stop file appears. Then it
prints JSON: the session ids it appended and the ones it deleted (both committed), and how many
commits it retried.

usage: busy_writer.py CATALOG_DB WAREHOUSE CATALOG_NAME TABLE STOP_FILE SEED

The table has the columns session_id, anonymous_id, page (as make_verdict_fixtures.py writes
web.sessions); the writer's rows belong to customers W0000000.. that nobody erases.
"""
import json
import os
import random
import sys
import time

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.expressions import In


def main() -> int:
    db, warehouse, name, table_name, stop, seed = sys.argv[1:7]
    rng = random.Random(int(seed))
    catalog = SqlCatalog(name, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    appended, deleted, retries, n = [], [], 0, 0
    while not os.path.exists(stop):
        if appended and rng.random() < 0.25:
            victims = rng.sample(appended, min(len(appended), rng.randint(1, 2)))
            victims = [v for v in victims if v not in deleted]

            def change(t):
                if victims:
                    t.delete(In("session_id", victims))

            done, is_delete = victims, True
        else:
            rows = []
            for _ in range(rng.randint(1, 4)):
                n += 1
                c = f"W{n:07d}"
                rows.append(f"a-{c}#1")

            def change(t, rows=rows):
                t.append(
                    pa.table(
                        {
                            "session_id": rows,
                            "anonymous_id": [s.split("#")[0] for s in rows],
                            "page": ["/busy"] * len(rows),
                        },
                        schema=t.schema().as_arrow(),
                    )
                )

            done, is_delete = rows, False
        for attempt in range(50):
            try:
                change(catalog.load_table(table_name))
                break
            except (CommitFailedException, ValidationException, OSError):
                # A lost race; PyIceberg's own retry finding its starting snapshot expired
                # ("Cannot find starting snapshot"); a file an expiry beside it removed while
                # it read: reload and do it again (nothing of the attempt was committed).
                retries += 1
                time.sleep(rng.uniform(0.01, 0.05))
        else:
            raise SystemExit("the writer lost 50 races in a row")
        if is_delete:
            deleted.extend(done)
        else:
            appended.extend(done)
        time.sleep(rng.uniform(0.05, 0.3))
    print(json.dumps({"appended": appended, "deleted": deleted, "retries": retries}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
