"""Self-check of the servers scripts/services.sh starts: exits non-zero when one of them does not
behave as lethe's tests (and docs/services.md) expect.

    bash scripts/services.sh start all "$STATE"
    "$(bash scripts/python-env.sh)" scripts/services_smoke.py "$STATE"   # or with the env loaded

It checks, against the real servers:
  - the SeaweedFS Iceberg REST catalog: /v1/config prefix, OAuth2 client credentials, a wrong
    secret refused, PyIceberg RestCatalog (OAuth2 and SigV4 `s3tables`) create namespace, create
    table, append, read back; a stale commit refused with 409 CommitFailedException, and
    PyIceberg's retry of a stale append;
  - SeaweedFS S3 through boto3: bucket versioning (noncurrent versions, delete markers, reads and
    deletes by VersionId), multipart upload, ranged GET, ListObjectsV2 pagination;
  - physical purge: a deleted object's bytes stay in the volume files until `weed shell` runs
    `lock; volume.vacuum ...; unlock`, and are gone afterwards;
  - PostgreSQL: PyIceberg SqlCatalog over S3 creates its iceberg_tables schema, appends and reads;
  - every listening socket of both servers is bound to 127.0.0.1.
Prints no secret. Skips the part of a server that was not started (its variables are absent).
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

FAILURES: list[str] = []


def load_env(path: str) -> None:
    """Reads `export NAME=value` lines written by services.sh into os.environ."""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("export ") and "=" in line:
                name, _, value = line[len("export "):].partition("=")
                os.environ[name] = shlex.split(value)[0] if value else ""


def check(name: str):
    """Runs one check; records its failure without stopping the others."""

    def wrap(fn):
        t0 = time.time()
        try:
            detail = fn()
            print(f"ok   {name} ({time.time() - t0:.2f}s){': ' + detail if detail else ''}", flush=True)
        except Exception as e:  # noqa: BLE001 - report every failure, go on with the next check
            msg = f"{type(e).__name__}: {e}"
            for secret in filter(None, (os.environ.get("AWS_SECRET_ACCESS_KEY"), os.environ.get("LETHE_PG_PASSWORD"))):
                msg = msg.replace(secret, "***")
            print(f"FAIL {name} ({time.time() - t0:.2f}s): {msg}", flush=True)
            FAILURES.append(name)
        return fn

    return wrap


def env(name: str) -> str:
    return os.environ[name]


def s3_props() -> dict[str, str]:
    # PyIceberg sends X-Iceberg-Access-Delegation: vended-credentials, for which SeaweedFS answers
    # loadTable with an empty `config`: the S3 FileIO settings must come from the client.
    return {
        "s3.endpoint": env("LETHE_S3_ENDPOINT"),
        "s3.region": env("LETHE_S3_REGION"),
        "s3.path-style-access": "true",
        "s3.access-key-id": env("AWS_ACCESS_KEY_ID"),
        "s3.secret-access-key": env("AWS_SECRET_ACCESS_KEY"),
    }


def rest_catalog(auth: str):
    from pyiceberg.catalog.rest import RestCatalog

    props = {"uri": env("LETHE_REST_URI"), "warehouse": env("LETHE_REST_WAREHOUSE"), **s3_props()}
    if auth == "oauth2":
        props.update({"credential": env("LETHE_REST_CREDENTIAL"), "scope": "catalog"})
    else:
        props.update({
            "rest.sigv4-enabled": "true",
            "rest.signing-name": env("LETHE_REST_SIGV4_SIGNING_NAME"),
            "rest.signing-region": env("LETHE_REST_SIGV4_REGION"),
        })
    return RestCatalog("lethe_rest", **props)


def s3_client():
    import boto3

    return boto3.client("s3", endpoint_url=env("LETHE_S3_ENDPOINT"), region_name=env("LETHE_S3_REGION"))


def listening_addresses(pid: int) -> set[str]:
    """Local addresses of the TCP sockets process `pid` listens on (from /proc)."""
    inodes = set()
    for fd in glob.glob(f"/proc/{pid}/fd/*"):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        with open(table) as f:
            next(f)
            for row in f:
                cols = row.split()
                local, state, inode = cols[1], cols[3], cols[9]
                if state == "0A" and inode in inodes:  # 0A = LISTEN
                    addr, port = local.split(":")
                    if width == 8:
                        ip = ".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0))
                    else:
                        ip = "v6:" + addr
                    found.add(f"{ip}:{int(port, 16)}")
    return found


def main() -> int:
    if len(sys.argv) > 1:
        load_env(os.path.join(sys.argv[1], "env"))
    run = uuid.uuid4().hex[:8]
    have_sw = "LETHE_REST_URI" in os.environ
    have_pg = "LETHE_PG_SQLALCHEMY_URI" in os.environ
    if not (have_sw or have_pg):
        print("no service variables (pass STATE_DIR or load STATE_DIR/env)", file=sys.stderr)
        return 2

    if have_sw:
        import pyarrow as pa

        rest = env("LETHE_REST_URI")
        table_bucket = env("LETHE_REST_WAREHOUSE").removeprefix("s3://")
        bucket = env("LETHE_S3_BUCKET")

        @check("SeaweedFS: every listener on 127.0.0.1")
        def _():
            addrs = listening_addresses(int(env("LETHE_SEAWEEDFS_PID")))
            bad = [a for a in addrs if not a.startswith("127.0.0.1:")]
            assert addrs and not bad, f"listening on {sorted(bad)}"
            return f"{len(addrs)} listeners"

        @check("REST /v1/config?warehouse= gives the prefix")
        def _():
            q = urllib.parse.quote(env("LETHE_REST_WAREHOUSE"))
            cfg = json.load(urllib.request.urlopen(f"{rest}/v1/config?warehouse={q}"))
            assert cfg["overrides"]["prefix"] == table_bucket, cfg
            return json.dumps(cfg)

        def token(secret: str) -> tuple[int, dict]:
            body = urllib.parse.urlencode({
                "grant_type": "client_credentials",
                "client_id": env("LETHE_REST_OAUTH_CLIENT_ID"),
                "client_secret": secret,
            }).encode()
            try:
                r = urllib.request.urlopen(env("LETHE_REST_OAUTH_TOKEN_URI"), data=body)
                return r.status, json.load(r)
            except urllib.error.HTTPError as e:
                return e.code, json.load(e)

        @check("REST OAuth2 client credentials: token; a wrong secret gets 401")
        def _():
            status, body = token(env("LETHE_REST_OAUTH_CLIENT_SECRET"))
            assert status == 200 and body["token_type"].lower() == "bearer" and body["access_token"], status
            status, body = token("wrong-secret")
            assert status == 401, status
            return f"expires_in={token(env('LETHE_REST_OAUTH_CLIENT_SECRET'))[1]['expires_in']}"

        ns = f"smoke_{run}"
        rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})

        @check("PyIceberg RestCatalog (OAuth2): namespace, table, append, read back")
        def _():
            cat = rest_catalog("oauth2")
            cat.create_namespace(ns)
            t = cat.create_table(f"{ns}.people", schema=rows.schema)
            t.append(rows)
            back = cat.load_table(f"{ns}.people").scan().to_arrow()
            assert back.num_rows == 3 and sorted(back["id"].to_pylist()) == [1, 2, 3], back
            return f"metadata at {cat.load_table(f'{ns}.people').metadata_location}"

        def bearer() -> str:
            status, body = token(env("LETHE_REST_OAUTH_CLIENT_SECRET"))
            assert status == 200, status
            return body["access_token"]

        @check("REST commit: a stale assert-ref-snapshot-id gets 409 CommitFailedException")
        def _():
            url = f"{rest}/v1/{table_bucket}/namespaces/{ns}/tables/people"
            headers = {"Authorization": f"Bearer {bearer()}", "Content-Type": "application/json"}
            meta = json.load(urllib.request.urlopen(urllib.request.Request(url, headers=headers)))["metadata"]
            current = meta["current-snapshot-id"]
            stale = {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": current + 1}],
                     "updates": [{"action": "set-properties", "updates": {"smoke": run}}]}
            try:
                urllib.request.urlopen(urllib.request.Request(url, data=json.dumps(stale).encode(), headers=headers))
                raise AssertionError("the stale commit was accepted")
            except urllib.error.HTTPError as e:
                body = json.load(e)
                assert e.code == 409 and body["error"]["type"] == "CommitFailedException", (e.code, body)
            fresh = dict(stale, requirements=[{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": current}])
            r = json.load(urllib.request.urlopen(urllib.request.Request(url, data=json.dumps(fresh).encode(), headers=headers)))
            assert r["metadata"]["properties"]["smoke"] == run, r["metadata"]["properties"]
            return f"then the fresh one is committed: {r['metadata-location'].rsplit('/', 1)[1]}"

        @check("PyIceberg: an append from a stale table is retried after the 409, no row lost")
        def _():
            cat = rest_catalog("oauth2")
            first, second = cat.load_table(f"{ns}.people"), cat.load_table(f"{ns}.people")
            first.append(rows)
            second.append(rows)  # 409, then PyIceberg refreshes and retries (commit.retry.num-retries)
            n = cat.load_table(f"{ns}.people").scan().to_arrow().num_rows
            assert n == 9, n
            return "9 rows"

        @check("PyIceberg RestCatalog (SigV4, signing name s3tables): list and read")
        def _():
            cat = rest_catalog("sigv4")
            assert (ns,) in cat.list_namespaces()
            n = cat.load_table(f"{ns}.people").scan().to_arrow().num_rows
            assert n == 9, n
            t = cat.create_table(f"{ns}.signed", schema=rows.schema)
            t.append(rows)
            return "create + append + read"

        @check("S3 versioning: noncurrent versions, delete markers, get/delete by VersionId")
        def _():
            s3 = s3_client()
            vb = f"versioned-{run}"
            s3.create_bucket(Bucket=vb)
            s3.put_bucket_versioning(Bucket=vb, VersioningConfiguration={"Status": "Enabled"})
            assert s3.get_bucket_versioning(Bucket=vb)["Status"] == "Enabled"
            v1 = s3.put_object(Bucket=vb, Key="k", Body=b"first")["VersionId"]
            s3.put_object(Bucket=vb, Key="k", Body=b"second")
            marker = s3.delete_object(Bucket=vb, Key="k")
            assert marker["DeleteMarker"], marker
            listed = s3.list_object_versions(Bucket=vb, Prefix="k")
            versions, markers = listed.get("Versions", []), listed.get("DeleteMarkers", [])
            assert len(versions) == 2 and not any(v["IsLatest"] for v in versions), versions
            assert len(markers) == 1 and markers[0]["IsLatest"], markers
            assert s3.list_objects_v2(Bucket=vb).get("KeyCount") == 0
            assert s3.get_object(Bucket=vb, Key="k", VersionId=v1)["Body"].read() == b"first"
            for v in versions + markers:
                s3.delete_object(Bucket=vb, Key="k", VersionId=v["VersionId"])
            listed = s3.list_object_versions(Bucket=vb, Prefix="k")
            assert not listed.get("Versions") and not listed.get("DeleteMarkers"), listed
            return "2 versions + 1 marker, then none"

        @check("S3 versioning on the table bucket (warehouse) too")
        def _():
            s3 = s3_client()
            s3.put_bucket_versioning(Bucket=table_bucket, VersioningConfiguration={"Status": "Enabled"})
            # The table bucket only takes keys under <namespace>/<table>/data|metadata/ with
            # Iceberg's extensions (data/: .parquet .avro .orc or none; metadata/: .avro
            # .metadata.json .stats).
            key = f"{ns}/people/data/smoke-{run}.parquet"
            s3.put_object(Bucket=table_bucket, Key=key, Body=b"one")
            s3.delete_object(Bucket=table_bucket, Key=key)
            listed = s3.list_object_versions(Bucket=table_bucket, Prefix=key)
            assert len(listed.get("Versions", [])) == 1 and len(listed.get("DeleteMarkers", [])) == 1, listed
            for v in listed["Versions"] + listed["DeleteMarkers"]:
                s3.delete_object(Bucket=table_bucket, Key=key, VersionId=v["VersionId"])
            s3.put_bucket_versioning(Bucket=table_bucket, VersioningConfiguration={"Status": "Suspended"})
            return "enabled, 1 noncurrent version + 1 marker, removed, suspended"

        @check("S3 multipart upload and ranged GET")
        def _():
            s3 = s3_client()
            key = f"smoke-{run}/multipart.bin"
            part = os.urandom(5 * 1024 * 1024)
            up = s3.create_multipart_upload(Bucket=bucket, Key=key)
            parts = []
            for n, body in enumerate([part, b"tail"], start=1):
                e = s3.upload_part(Bucket=bucket, Key=key, UploadId=up["UploadId"], PartNumber=n, Body=body)
                parts.append({"ETag": e["ETag"], "PartNumber": n})
            s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up["UploadId"], MultipartUpload={"Parts": parts})
            assert s3.head_object(Bucket=bucket, Key=key)["ContentLength"] == len(part) + 4
            g = s3.get_object(Bucket=bucket, Key=key, Range="bytes=-8")
            assert g["Body"].read() == part[-4:] + b"tail" and g["ResponseMetadata"]["HTTPStatusCode"] == 206
            g = s3.get_object(Bucket=bucket, Key=key, Range="bytes=100-199")
            assert g["Body"].read() == part[100:200]
            s3.delete_object(Bucket=bucket, Key=key)
            return "2 parts, suffix and middle ranges"

        @check("S3 ListObjectsV2 pagination (1,100 keys, MaxKeys 1000)")
        def _():
            from concurrent.futures import ThreadPoolExecutor

            s3 = s3_client()
            prefix = f"smoke-{run}/many/"
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda i: s3.put_object(Bucket=bucket, Key=f"{prefix}{i:05d}", Body=b""), range(1100)))
            pages, keys, kw = 0, [], {"Bucket": bucket, "Prefix": prefix, "MaxKeys": 1000}
            while True:
                r = s3.list_objects_v2(**kw)
                pages += 1
                keys += [o["Key"] for o in r.get("Contents", [])]
                if not r["IsTruncated"]:
                    break
                kw["ContinuationToken"] = r["NextContinuationToken"]
            assert pages == 2 and len(keys) == 1100 and keys == sorted(keys), (pages, len(keys))
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda k: s3.delete_object(Bucket=bucket, Key=k), keys))
            return f"{pages} pages"

        @check("physical purge: bytes stay after DeleteObject until volume.vacuum")
        def _():
            s3 = s3_client()
            pb = f"purge-{run}"
            s3.create_bucket(Bucket=pb)
            # Random bytes: SeaweedFS gzips compressible needles, so text may not be found verbatim.
            body = os.urandom(64 * 1024)
            needle = body[4096:4160]
            data_dir = env("LETHE_SEAWEEDFS_DATA_DIR")

            def copies() -> int:
                n = 0
                for path in glob.glob(os.path.join(data_dir, "*.dat")):
                    with open(path, "rb") as f:
                        n += f.read().count(needle)
                return n

            def deletes() -> dict:
                st = json.load(urllib.request.urlopen(f"http://{env('LETHE_SEAWEEDFS_VOLUME')}/status"))
                return {v["Id"]: v["DeleteCount"] for v in st["Volumes"]}

            s3.put_object(Bucket=pb, Key="victim.bin", Body=body)
            assert copies() == 1, "the object's bytes are not in a volume file"
            before = deletes()
            s3.delete_object(Bucket=pb, Key="victim.bin")
            # The filer deletes the chunks asynchronously: wait until the volume counts it.
            deadline = time.time() + 30
            while deletes() == before:
                assert time.time() < deadline, "the volume never counted the deletion"
                time.sleep(0.05)
            waited = time.time()
            assert copies() == 1, "bytes already gone before vacuum"
            cmd = "lock; volume.vacuum -garbageThreshold=0.000000001; unlock"
            p = subprocess.run([env("LETHE_WEED"), "shell", f"-master={env('LETHE_SEAWEEDFS_MASTER')}",
                                f"-filer={env('LETHE_SEAWEEDFS_FILER')}"], input=cmd, text=True,
                               capture_output=True, timeout=120)
            assert p.returncode == 0, p.stdout + p.stderr
            assert copies() == 0, "bytes still in the volume after vacuum"
            return f"gone after vacuum ({time.time() - waited:.2f}s)"

    if have_pg:

        @check("PostgreSQL: every listener on 127.0.0.1")
        def _():
            addrs = listening_addresses(int(env("LETHE_PG_PID")))
            bad = [a for a in addrs if not a.startswith("127.0.0.1:")]
            assert addrs and not bad, f"listening on {sorted(bad)}"
            return ", ".join(sorted(addrs))

        @check("PostgreSQL: PyIceberg SqlCatalog creates iceberg_tables, append, read back")
        def _():
            import psycopg2
            import pyarrow as pa
            from pyiceberg.catalog.sql import SqlCatalog

            props = {"uri": env("LETHE_PG_SQLALCHEMY_URI")}
            if have_sw:
                props.update({"warehouse": f"s3://{env('LETHE_S3_BUCKET')}/sql-{run}", **s3_props()})
            else:
                import tempfile

                props["warehouse"] = "file://" + tempfile.mkdtemp(prefix="lethe-smoke-")
            cat = SqlCatalog(f"smoke_{run}", **props)
            cat.create_namespace("ns")
            t = cat.create_table("ns.t", schema=pa.schema([("id", pa.int64())]))
            t.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
            assert cat.load_table("ns.t").scan().to_arrow().num_rows == 2
            conn = psycopg2.connect(env("LETHE_PG_URI"))
            with conn, conn.cursor() as cur:
                cur.execute("select table_name, column_name from information_schema.columns "
                            "where table_name like 'iceberg_%' order by table_name, ordinal_position")
                cols = cur.fetchall()
                cur.execute("select count(*) from iceberg_tables where catalog_name = %s", (f"smoke_{run}",))
                n = cur.fetchone()[0]
            conn.close()
            want = [("iceberg_namespace_properties", c) for c in ("catalog_name", "namespace", "property_key", "property_value")]
            want += [("iceberg_tables", c) for c in ("catalog_name", "table_namespace", "table_name", "metadata_location", "previous_metadata_location", "iceberg_type")]
            assert cols == want, cols
            assert n == 1, n
            return f"warehouse {props['warehouse'].split('/sql-')[0]}/…"

    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed: {', '.join(FAILURES)}")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
