"""Reads merge-on-read tables of a lethe warehouse the way the Iceberg spec says, independently
of lethe: PyIceberg 0.12 loads the catalog, metadata, manifest lists and manifests (sequence
numbers inherited as PyIceberg does), PyArrow reads the Parquet files, and this script applies
position deletes (data sequence number <= the delete's) and equality deletes (strictly smaller
data sequence number; null equals null) by field id. PyIceberg's own scan refuses equality
deletes, hence this reader. Prints JSON per table spec.

usage: read_mor.py CATALOG_DB WAREHOUSE CATALOG_NAME TABLE[?COL=VALUE] ...

For each table: `rows` (live rows), `matching` (live rows where COL equals VALUE, when given),
`data_files`, `position_delete_files`, `equality_delete_files`, `dangling_position_deletes`
(position delete rows naming a file that is not a live data file of the snapshot),
`sequence_numbers` of the delete files, `format_version`.
"""
import json
import sys

import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFileContent

FILE_PATH_ID = 2147483546
POS_ID = 2147483545


def read_parquet(io, path):
    with io.new_input(path).open() as f:
        return pq.read_table(f)


def columns_by_id(t):
    out = {}
    for i, field in enumerate(t.schema):
        md = field.metadata or {}
        fid = md.get(b"PARQUET:field_id")
        if fid is not None:
            out[int(fid)] = t.column(i).to_pylist()
    return out


def main() -> int:
    db, warehouse, name, *specs = sys.argv[1:]
    catalog = SqlCatalog(name, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    out = {}
    for spec in specs:
        table_name, _, cond = spec.partition("?")
        table = catalog.load_table(table_name)
        io = table.io
        schema = table.schema()
        specs_by_id = table.specs()
        snap = table.current_snapshot()
        entries = []
        if snap is not None:
            for m in snap.manifests(io):
                for e in m.fetch_manifest_entry(io, discard_deleted=True):
                    entries.append((m.partition_spec_id, e))
        data = [(s, e) for s, e in entries if e.data_file.content == DataFileContent.DATA]
        pos = [(s, e) for s, e in entries if e.data_file.content == DataFileContent.POSITION_DELETES]
        eq = [(s, e) for s, e in entries if e.data_file.content == DataFileContent.EQUALITY_DELETES]

        def seq(e):
            return e.sequence_number or 0

        def same_partition(ds, d, s, e):
            return specs_by_id[ds].is_unpartitioned() or (ds == s and d.data_file.partition == e.data_file.partition)

        pos_content = {}
        for _, d in pos:
            cols = columns_by_id(read_parquet(io, d.data_file.file_path))
            m = {}
            for p, q in zip(cols[FILE_PATH_ID], cols[POS_ID]):
                m.setdefault(p, set()).add(q)
            pos_content[d.data_file.file_path] = m
        eq_content = {}
        for _, d in eq:
            cols = columns_by_id(read_parquet(io, d.data_file.file_path))
            ids = list(d.data_file.equality_ids)
            eq_content[d.data_file.file_path] = (ids, set(zip(*[cols[i] for i in ids])))

        col_id = None
        val = None
        if cond:
            col, val = cond.split("=", 1)
            try:
                val = int(val)
            except ValueError:
                pass
            col_id = schema.find_field(col).field_id
        live_total = 0
        matching = 0
        for s, e in data:
            t = read_parquet(io, e.data_file.file_path)
            cols = columns_by_id(t)
            n = t.num_rows
            alive = [True] * n
            for ds, d in pos:
                if seq(d) < seq(e) or not same_partition(ds, d, s, e):
                    continue
                for p in pos_content[d.data_file.file_path].get(e.data_file.file_path, ()):
                    alive[p] = False
            for ds, d in eq:
                if seq(d) <= seq(e) or not same_partition(ds, d, s, e):
                    continue
                ids, keys = eq_content[d.data_file.file_path]
                vals = [cols.get(i, [None] * n) for i in ids]
                for r in range(n):
                    if alive[r] and tuple(v[r] for v in vals) in keys:
                        alive[r] = False
            live_total += sum(alive)
            if col_id is not None:
                c = cols.get(col_id, [None] * n)
                matching += sum(1 for r in range(n) if alive[r] and c[r] == val)
        live_paths = {e.data_file.file_path for _, e in data}
        dangling = sum(
            len(ps) for m in pos_content.values() for p, ps in m.items() if p not in live_paths
        )
        result = {
            "rows": live_total,
            "data_files": len(data),
            "position_delete_files": len(pos),
            "equality_delete_files": len(eq),
            "dangling_position_deletes": dangling,
            "sequence_numbers": sorted(seq(d) for _, d in pos + eq),
            "format_version": table.metadata.format_version,
        }
        if col_id is not None:
            result["matching"] = matching
        out[spec] = result
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
