"""Reads format v3 tables of a warehouse with PyIceberg 0.12 (which applies deletion vectors
itself) and describes their deletion vectors from the manifests. Prints JSON.

usage: read_v3.py CATALOG_DB WAREHOUSE CATALOG_NAME SPEC...   (SPEC: TABLE or TABLE|FILTER)

Output: a JSON object keyed by SPEC, each with
  `format_version`, `next_row_id`,
  `rows` (the rows PyIceberg's scan returns, every value as text — timestamps in Arrow's
  text form, to the nanosecond — sorted), `row_count`,
  `data_files` (live data files: path, record_count, first_row_id),
  `deletion_vectors` (live vectors: Puffin path, content_offset, referenced_data_file,
  record_count), `puffin_files` (distinct Puffin files holding live vectors),
  `dangling_deletion_vectors` (live vectors whose referenced data file is not live).
"""
import json
import sys

import pyarrow as pa
import pyarrow.compute as pc

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.avro.file import AvroFile
from pyiceberg.manifest import (
    MANIFEST_ENTRY_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
)


def text(v):
    return None if v is None else str(v)


def v3_data_files(io, manifest_path):
    """The live entries' data files of a manifest, read with the format v3 manifest schema
    (PyIceberg 0.12 reads manifests with the v2 one, which lacks content_offset and
    referenced_data_file), as dicts by field name. Stored first_row_id, not inherited."""
    schema = MANIFEST_ENTRY_SCHEMAS[3]
    names = [f.name for f in schema.find_field("data_file").field_type.fields]
    with AvroFile[ManifestEntry](
        io.new_input(manifest_path),
        schema,
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    ) as reader:
        return [
            dict(zip(names, e.data_file._data))
            for e in reader
            if e.status != ManifestEntryStatus.DELETED
        ]


def main() -> int:
    db, warehouse, name, *specs = sys.argv[1:]
    catalog = SqlCatalog(name, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    out = {}
    for spec in specs:
        table_name, _, row_filter = spec.partition("|")
        table = catalog.load_table(table_name)
        scan = table.scan(row_filter=row_filter) if row_filter else table.scan()
        arrow = scan.to_arrow()
        # Timestamps as Arrow's text (nanoseconds don't fit Python's datetime).
        for i, field in enumerate(arrow.schema):
            if pa.types.is_timestamp(field.type):
                arrow = arrow.set_column(i, field.name, pc.cast(arrow.column(i), pa.string()))
        rows = sorted(
            ({k: text(v) for k, v in r.items()} for r in arrow.to_pylist()),
            key=lambda r: json.dumps(r, sort_keys=True),
        )
        data, vectors = [], []
        snap = table.current_snapshot()
        if snap is not None:
            for m in snap.manifests(table.io):
                for f in v3_data_files(table.io, m.manifest_path):
                    if f["content"] == DataFileContent.DATA:
                        data.append(
                            {
                                "path": f["file_path"],
                                "record_count": f["record_count"],
                                "first_row_id": f["first_row_id"],
                            }
                        )
                    elif f["file_format"] == FileFormat.PUFFIN:
                        vectors.append(
                            {
                                "path": f["file_path"],
                                "content_offset": f["content_offset"],
                                "referenced_data_file": f["referenced_data_file"],
                                "record_count": f["record_count"],
                            }
                        )
        live = {d["path"] for d in data}
        out[spec] = {
            "format_version": table.metadata.format_version,
            "next_row_id": getattr(table.metadata, "next_row_id", None),
            "row_count": arrow.num_rows,
            "rows": rows,
            "data_files": data,
            "deletion_vectors": vectors,
            "puffin_files": sorted({v["path"] for v in vectors}),
            "dangling_deletion_vectors": [
                v for v in vectors if v["referenced_data_file"] not in live
            ],
        }
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
