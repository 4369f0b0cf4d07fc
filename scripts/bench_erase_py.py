"""PyIceberg 0.12's side of the erasure benchmark: the same row changes lethe's plan makes, then
snapshot expiry and a sweep of unreferenced files, on an identical copy of the demo.

usage: bench_erase_py.py CATALOG_DB WAREHOUSE PLAN_JSON

PLAN_JSON is `lethe explain --subject learner=ID --json` on the copy (made before the timing
starts, so planning is lethe's own advantage only in that it is not timed here at all). For each
step (its rows: `column` in `values`, OR-ed with each `also` selector whose values the plan
shows): DELETE is `Table.delete(rows)`; REWRITE reads the matching rows, sets the
erased columns to null and writes them back with `Table.overwrite(rows, overwrite_filter=...)`;
RECOMPUTE (lethe reruns the pipeline) is stood in for by rewriting the table with its own rows
(`Table.overwrite(table.scan().to_arrow())`), which costs no more than a rerun. Then every
changed table's snapshots but the current one are expired (`expire_snapshots().by_ids(...)`)
and every file under the table's location that its metadata no longer references is removed
(PyIceberg 0.12 has no orphan-file removal). Prints one JSON line with the timings; the whole
process (imports included) is what the benchmark compares, under /usr/bin/time.
"""
import json
import os
import sys
import time

START = time.perf_counter()

import pyarrow as pa  # noqa: E402
from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402
from pyiceberg.expressions import In, Or  # noqa: E402


def typed(table, column, values):
    field = table.schema().find_field(column)
    if "int" in str(field.field_type) or "long" in str(field.field_type):
        return [int(v) for v in values]
    return list(values)


def selection(table, step):
    """The step's rows as lethe's plan selects them: `column` in `values`, OR-ed with each
    further selector (`also`) whose values the plan shows (ID values; others it only counts)."""
    pred = In(step["column"], typed(table, step["column"], step["values"]))
    for sel in step.get("also", []):
        if sel.get("values"):
            pred = Or(pred, In(sel["column"], typed(table, sel["column"], sel["values"])))
    return pred


def referenced(table):
    """Every file the table's metadata still reaches: metadata files, manifest lists,
    manifests, data and delete files of every remaining snapshot."""
    keep = {table.metadata_location}
    keep.update(e.metadata_file for e in table.metadata.metadata_log)
    io = table.io
    for snap in table.metadata.snapshots:
        keep.add(snap.manifest_list)
        for m in snap.manifests(io):
            keep.add(m.manifest_path)
            for entry in m.fetch_manifest_entry(io, discard_deleted=False):
                keep.add(entry.data_file.file_path)
    return {k.removeprefix("file://") for k in keep}


def sweep(table):
    keep = referenced(table)
    root = table.location().removeprefix("file://")
    removed = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            if p not in keep:
                os.remove(p)
                removed += 1
    return removed


def main() -> int:
    db, warehouse, plan_path = sys.argv[1:]
    with open(plan_path) as f:
        plan = json.load(f)
    catalog = SqlCatalog("lethe", uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    started = time.perf_counter()
    changed = []
    rows = {}
    for step in plan["steps"]:
        action, name = step["action"], step["table"]
        if action not in ("DELETE", "REWRITE", "RECOMPUTE"):
            continue
        table = catalog.load_table(name)
        if action == "RECOMPUTE":
            table.overwrite(table.scan().to_arrow())
        else:
            pred = selection(table, step)
            if action == "DELETE":
                rows[name] = table.scan(row_filter=pred).to_arrow().num_rows
                table.delete(pred)
            else:
                hit = table.scan(row_filter=pred).to_arrow()
                rows[name] = hit.num_rows
                for col in step["erase_columns"]:
                    i = hit.schema.get_field_index(col)
                    hit = hit.set_column(i, hit.schema.field(i), pa.nulls(hit.num_rows, hit.schema.field(i).type))
                table.overwrite(hit, overwrite_filter=pred)
        changed.append(name)
    changes_done = time.perf_counter()
    removed = 0
    for name in changed:
        table = catalog.load_table(name)
        current = table.metadata.current_snapshot_id
        old = [s.snapshot_id for s in table.metadata.snapshots if s.snapshot_id != current]
        if old:
            table.maintenance.expire_snapshots().by_ids(old).commit()
        removed += sweep(catalog.load_table(name))
    end = time.perf_counter()
    print(json.dumps({
        "tables_changed": len(changed),
        "rows_matched": rows,
        "files_removed": removed,
        "changes_seconds": changes_done - started,
        "cleanup_seconds": end - changes_done,
        "in_process_seconds": end - started,
        "since_start_seconds": end - START,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
