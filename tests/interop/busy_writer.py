"""Another writer committing beside lethe: appends sessions to a table with PyIceberg 0.12 every
50-300 ms and now and then deletes some of the rows it appended, retrying a commit that lost a
race the way its users do (reload the table, do it again), until a stop file appears. Then it
prints JSON: the session ids it appended and the ones it deleted (both committed), and how many
commits it retried.

usage: busy_writer.py CATALOG_DB WAREHOUSE CATALOG_NAME TABLE STOP_FILE SEED
                      [--deletes SHARE] [--pause MIN MAX] [--prefix P]

The table has the columns session_id, anonymous_id, page (as make_verdict_fixtures.py writes
web.sessions); the writer's rows belong to customers W0000000.. (P0000000.. with --prefix P)
that nobody erases. --deletes is the share of its changes that delete rows it appended (default
0.25; 0: an append-only stream), --pause the seconds it waits between changes (default 0.05
0.3). The JSON also counts, apart, the retries whose cause was PyIceberg's "Cannot find
starting snapshot" (another writer expired the snapshot its commit started from) and a file
it read that was gone (OSError).
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


def options(args):
    share, pause, prefix = 0.25, (0.05, 0.3), "W"
    i = 0
    while i < len(args):
        if args[i] == "--deletes":
            share, i = float(args[i + 1]), i + 2
        elif args[i] == "--pause":
            pause, i = (float(args[i + 1]), float(args[i + 2])), i + 3
        elif args[i] == "--prefix":
            prefix, i = args[i + 1], i + 2
        else:
            raise SystemExit(f"unknown option {args[i]}")
    return share, pause, prefix


def main() -> int:
    db, warehouse, name, table_name, stop, seed = sys.argv[1:7]
    share, pause, prefix = options(sys.argv[7:])
    rng = random.Random(int(seed))
    catalog = SqlCatalog(name, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    appended, deleted, retries, n = [], [], 0, 0
    lost_start, file_errors = 0, 0
    while not os.path.exists(stop):
        if appended and rng.random() < share:
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
                c = f"{prefix}{n:07d}"
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
            except (CommitFailedException, ValidationException, OSError) as e:
                # A lost race; PyIceberg's own retry finding its starting snapshot expired
                # ("Cannot find starting snapshot"); a file an expiry beside it removed while
                # it read: reload and do it again (nothing of the attempt was committed).
                retries += 1
                if "Cannot find starting snapshot" in str(e):
                    lost_start += 1
                elif isinstance(e, OSError):
                    file_errors += 1
                time.sleep(rng.uniform(0.01, 0.05))
        else:
            raise SystemExit("the writer lost 50 races in a row")
        if is_delete:
            deleted.extend(done)
        else:
            appended.extend(done)
        time.sleep(rng.uniform(*pause))
    print(
        json.dumps(
            {
                "appended": appended,
                "deleted": deleted,
                "retries": retries,
                "lost_start": lost_start,
                "file_errors": file_errors,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
