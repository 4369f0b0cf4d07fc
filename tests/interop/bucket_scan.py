"""The independent proof scan: lists a bucket with boto3 (current objects, and with --versions
every noncurrent version too), reads each object with its own format's reader — pyarrow for
Parquet (every value of every column, footer statistics), fastavro for Avro (every record,
bound bytes included), JSON/text as text — and reports the objects holding a trace. Prints JSON.

usage: bucket_scan.py BUCKET PREFIX [--versions] [--id COL=VALUE]... [--value TEXT]...
       bucket_scan.py BUCKET PREFIX --grep-secrets VAR [VAR...]
       bucket_scan.py --create-bucket BUCKET [--versioned]

An ID trace matches a column of that name holding the value (Parquet), a record field of that
name (Avro), or the decimal text next to the column name (JSON); a value trace matches its
lowercased text anywhere (Parquet strings, Avro strings and bytes, text). `--grep-secrets`
looks for the values of the named environment variables in every object's bytes (and in the
decompressed Avro records) and prints only which objects hold one, never the value.
S3 settings: LETHE_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY.
"""
import io
import json
import os
import struct
import sys

import boto3
import fastavro
import pyarrow.parquet as pq


def client():
    return boto3.client(
        "s3",
        endpoint_url=os.environ["LETHE_S3_ENDPOINT"],
        region_name=os.environ.get("LETHE_S3_REGION", "us-east-1"),
    )


def objects(s3, bucket, prefix, versions):
    if versions:
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
            for v in page.get("Versions", []):
                yield v["Key"], v["VersionId"], v["IsLatest"]
    else:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for o in page.get("Contents", []):
                yield o["Key"], None, True


def get(s3, bucket, key, version):
    kw = {"Bucket": bucket, "Key": key}
    if version:
        kw["VersionId"] = version
    return s3.get_object(**kw)["Body"].read()


def walk(value, out):
    """Every leaf of a nested Avro record, with its field name."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                walk(v, out)
            else:
                out.append((k, v))
    elif isinstance(value, list):
        for v in value:
            walk(v, out)


def holds(data: bytes, key: str, ids, values) -> list:
    found = []
    low_values = [v.lower() for v in values]
    if data[:4] == b"PAR1":
        f = pq.ParquetFile(io.BytesIO(data))
        t = f.read()
        for col, val in ids:
            if col in t.column_names:
                if any(x == val or str(x) == str(val) for x in t.column(col).to_pylist()):
                    found.append(f"id {col}")
        md = f.metadata
        for rg in range(md.num_row_groups):
            for c in range(md.num_columns):
                cc = md.row_group(rg).column(c)
                st = cc.statistics
                name = cc.path_in_schema
                if st is not None and st.has_min_max:
                    for col, val in ids:
                        if name == col and (st.min == val or st.max == val):
                            found.append(f"statistic {col}")
                    for v in low_values:
                        for bound in (st.min, st.max):
                            if isinstance(bound, str) and v in bound.lower():
                                found.append("value in statistics")
        for col in t.column_names:
            for x in t.column(col).to_pylist():
                if isinstance(x, str) and any(v in x.lower() for v in low_values):
                    found.append(f"value in {col}")
                    break
    elif data[:4] == b"Obj\x01":
        reader = fastavro.reader(io.BytesIO(data))
        # An Iceberg manifest carries its table's schema: bounds are keyed by field id.
        field_ids = {}
        meta_schema = reader.metadata.get("schema")
        if meta_schema:
            try:
                for f in json.loads(meta_schema).get("fields", []):
                    field_ids[f["name"]] = f["id"]
            except (ValueError, KeyError, TypeError):
                pass
        leaves = []
        for rec in reader:
            walk(rec, leaves)
            df = rec.get("data_file") if isinstance(rec, dict) else None
            if isinstance(df, dict):
                for side in ("lower_bounds", "upper_bounds"):
                    for kv in df.get(side) or []:
                        for col, val in ids:
                            if field_ids.get(col) != kv.get("key"):
                                continue
                            b = kv.get("value") or b""
                            if isinstance(val, int) and len(b) in (4, 8):
                                if struct.unpack("<i" if len(b) == 4 else "<q", b)[0] == val:
                                    found.append(f"manifest bound {col}")
                            elif b.decode("utf-8", "ignore") == str(val):
                                found.append(f"manifest bound {col}")
        for name, leaf in leaves:
            if isinstance(leaf, bytes):
                text = leaf.decode("utf-8", "ignore").lower()
            elif isinstance(leaf, str):
                text = leaf.lower()
            else:
                text = ""
            for col, val in ids:
                if name == col and leaf == val:
                    found.append(f"avro field {col}")
            if text and any(v in text for v in low_values):
                found.append(f"avro value in {name}")
    else:
        text = data.decode("utf-8", "ignore").lower()
        for v in low_values:
            if v in text:
                found.append("value in text")
        for col, val in ids:
            if f'"{col}": {val}' in text or f'"{col}":{val}' in text:
                found.append(f"id {col} in text")
    return sorted(set(found))


def main() -> int:
    args = sys.argv[1:]
    s3 = client()
    if args and args[0] == "--create-bucket":
        bucket = args[1]
        s3.create_bucket(Bucket=bucket)
        if "--versioned" in args:
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        print(json.dumps({"created": bucket, "versioning": s3.get_bucket_versioning(Bucket=bucket).get("Status")}))
        return 0
    bucket, prefix, *rest = args
    versions = "--versions" in rest
    ids, values, secrets = [], [], []
    i = 0
    while i < len(rest):
        if rest[i] == "--id":
            col, val = rest[i + 1].split("=", 1)
            try:
                val = int(val)
            except ValueError:
                pass
            ids.append((col, val))
            i += 2
        elif rest[i] == "--value":
            values.append(rest[i + 1])
            i += 2
        elif rest[i] == "--grep-secrets":
            secrets = [os.environ[v] for v in rest[i + 1:] if os.environ.get(v)]
            i = len(rest)
        else:
            i += 1
    out = {"objects": 0, "holding": {}, "secrets_in": [], "unreadable": {}}
    for key, version, latest in objects(s3, bucket, prefix, versions):
        if versions and latest:
            continue
        out["objects"] += 1
        name = key + (f"?versionId={version}" if version else "")
        data = get(s3, bucket, key, version)
        if secrets:
            blobs = [data]
            if data[:4] == b"Obj\x01":
                try:
                    blobs.append(json.dumps(list(fastavro.reader(io.BytesIO(data))), default=str).encode())
                except Exception:
                    pass
            if any(s.encode() in b for s in secrets for b in blobs):
                out["secrets_in"].append(name)
            continue
        try:
            found = holds(data, key, ids, values)
        except Exception as e:  # an object the readers can't read is reported, not skipped
            out["unreadable"][name] = type(e).__name__
            continue
        if found:
            out["holding"][name] = found
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
