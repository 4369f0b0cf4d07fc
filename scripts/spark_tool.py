#!/usr/bin/env python3
"""Spark 3.5 + Iceberg 1.10 as the second engine for lethe's integration tests.

Run with the venv python that scripts/spark-env.sh prints (LETHE_SPARK_PYTHON). Every command
prints one JSON object on stdout (Spark's own logging goes to stderr) and exits 0; a failure
prints {"error": ...} on stdout and exits 1. Each object carries "timing" with the Spark start
time and the command's wall time in seconds.

Commands (each takes the catalog options below):
  create-fixture --table NS.T --kind KIND (--rows FILE | --generate N --subject ID) [--then SQL]...
      KIND is one of
        v2-cow  format 2, partitioned by day, copy-on-write; a DELETE rewrites data files
        v2-mor  format 2, partitioned by day, merge-on-read (delete/update/merge); DELETE and
                UPDATE write position delete files
        v3-dv   format 3, string ids, unpartitioned by default, merge-on-read; DELETE and
                UPDATE write deletion vectors (several vectors in one Puffin file), then a
                column `channel` is added with initial-default 'web' and one more commit
                writes rows that carry it
      Rows: --rows FILE (JSON array or JSON lines of objects; "_commit": k puts a row in the
      k-th INSERT, default 0) or --generate N --subject ID (the pattern below). --then SQL
      replaces the kind's default row operations ({table} is the table's full name).
  read-table --table NS.T [--with-row-lineage] [--where PRED]
      row count and the rows, sorted (by every column but maps); --with-row-lineage adds _row_id and
      _last_updated_sequence_number (format 3 only)
  describe-files --table NS.T
      the current snapshot's data and delete files (path, content, format, record count,
      referenced_data_file, content_offset, content_size_in_bytes, the data files each delete
      file deletes from), and the deletion vectors whose referenced data file is not live
  sql --statement SQL [--statement SQL]...
      runs statements in order, prints the rows each returns
  batch FILE
      runs several commands in one Spark session: FILE is JSON lines, each a list of the
      arguments of one command (without the catalog options); prints one JSON line per command

Catalog options:
  --catalog-type jdbc|hadoop|rest   (default jdbc)
  --catalog-uri URI     jdbc:sqlite:/path/catalog.db, jdbc:postgresql://127.0.0.1:5432/db,
                        or the REST endpoint
  --catalog-name NAME   the catalog_name rows are stored under (default lethe); it is also the
                        Spark catalog's name, so SQL names tables NAME.ns.t
  --warehouse DIR       local folder (or file: URI) under which new tables are placed
  --jdbc-user USER      (password, if any, from $LETHE_SPARK_JDBC_PASSWORD, never an argument)
  --rest-credential-env VAR  env var holding an OAuth2 client credential "id:secret" (REST)
  --jars JARS           comma-separated; default $LETHE_SPARK_JARS (or what spark-env.sh prints)
  --s3-endpoint URL     s3:// and s3a:// locations through Hadoop's s3a at URL, path-style,
                        keys from $AWS_ACCESS_KEY_ID / $AWS_SECRET_ACCESS_KEY (--s3-region)
  --conf K=V            any other Spark setting ({catalog}.io-impl=... sets a catalog property)

The generated pattern (--generate N --subject ID, deterministic): row i in 0..N-1 has
  event_id   i (v2: bigint) or "e%06d" % i (v3: string)
  learner_id ID when i % 5 == 0 and the row is not in the last commit, otherwise
             1000 + i % 7 (skipping ID); v3: the same values as strings
  day        2024-01-01 + (i % 3) days (v2 partition column)
  score      i % 100
  note       "n%d" % i
  _commit    i * 3 // N (three INSERTs; the last one holds no subject row)
The kinds' default operations then are
  v2-cow  DELETE WHERE event_id % 10 = 3 AND event_id < (rows of the first commit), so only
          the first commit's files are rewritten
  v2-mor  DELETE WHERE event_id % 10 = 3; UPDATE SET score = score + 100 WHERE event_id % 10 = 7
  v3-dv   the same on the numeric suffix of event_id, then ADD COLUMN channel string
          DEFAULT 'web' (Iceberg API; Spark 3.5 SQL refuses DEFAULT) and a fourth INSERT of
          N // 10 rows (event ids N.., learner 1000 + i % 7, channel 'app')
so every kind has files holding the subject and files that don't, and (mor, v3) delete files
on both.
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Spark and py4j must never write to our stdout: keep the real stdout for the JSON and point
# file descriptor 1 (inherited by the JVM) at stderr before anything starts.
_JSON_OUT = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr


def emit(obj: dict) -> None:
    _JSON_OUT.write(json.dumps(obj, default=_json_default, sort_keys=False) + "\n")
    _JSON_OUT.flush()


def _json_default(v):
    if isinstance(v, (dt.date, dt.datetime)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if hasattr(v, "asDict"):
        return v.asDict(recursive=True)
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


class ToolError(Exception):
    """A failure reported as {"error": ...} with exit code 1."""


# ---------------------------------------------------------------- environment and session


def spark_env() -> dict:
    """The jars and Java home: from the environment, else from scripts/spark-env.sh."""
    env = {k: os.environ[k] for k in ("LETHE_SPARK_JARS", "LETHE_SPARK_JAVA_HOME") if k in os.environ}
    if "LETHE_SPARK_JARS" in env:
        return env
    res = subprocess.run(["bash", str(HERE / "spark-env.sh")], capture_output=True, text=True)
    if res.returncode != 0:
        raise ToolError(f"spark-env.sh exited {res.returncode}: {res.stderr.strip()[-2000:]}")
    for line in res.stdout.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            env.setdefault(k, v)
    return env


def warehouse_uri(w: str) -> str:
    if "://" in w or w.startswith("file:"):
        return w
    return "file://" + str(Path(w).resolve())


class Session:
    """One local[2] Spark session on loopback with the lethe catalog configured."""

    def __init__(self, args: argparse.Namespace):
        env = spark_env()
        if env.get("LETHE_SPARK_JAVA_HOME"):
            os.environ["JAVA_HOME"] = env["LETHE_SPARK_JAVA_HOME"]
        jars = args.jars or env["LETHE_SPARK_JARS"]
        self.tmp = tempfile.mkdtemp(prefix="lethe-spark-")
        # Loopback only, no UI, every scratch folder (shuffle, java.io.tmpdir, Derby) in tmp.
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        os.environ["SPARK_LOCAL_DIRS"] = os.path.join(self.tmp, "local")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        java_opts = (
            f"-Djava.io.tmpdir={self.tmp} -Dderby.system.home={self.tmp}/derby "
            "-Dlog4j2.level=WARN"
        )
        name = args.catalog_name
        cat = f"spark.sql.catalog.{name}"
        conf = {
            "spark.master": "local[2]",
            "spark.app.name": "lethe-spark-tool",
            # on the driver's class path (local mode: the driver is the executor), not
            # spark.jars, which copies every jar (235 MB with the AWS bundle) per session
            "spark.driver.extraClassPath": ":".join(j for j in jars.split(",") if j),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.memory": os.environ.get("LETHE_SPARK_DRIVER_MEMORY", "1g"),
            "spark.driver.extraJavaOptions": java_opts,
            "spark.sql.catalogImplementation": "in-memory",
            "spark.sql.warehouse.dir": os.path.join(self.tmp, "spark-warehouse"),
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            "spark.sql.defaultCatalog": name,
            # Spark's default redaction misses a REST catalog's `credential`
            "spark.redaction.regex": "(?i)secret|password|token|access[.]key|credential",
            cat: "org.apache.iceberg.spark.SparkCatalog",
        }
        if args.warehouse:
            # a REST catalog's warehouse is a name the server knows, not a folder
            wh = args.warehouse if args.catalog_type == "rest" else warehouse_uri(args.warehouse)
            conf[f"{cat}.warehouse"] = wh
            if wh.startswith("file:"):
                # a Hadoop catalog lists its folder on start; it must exist
                os.makedirs("/" + wh.split(":", 1)[1].lstrip("/"), exist_ok=True)
        if args.catalog_type == "jdbc":
            if not args.catalog_uri:
                raise ToolError("--catalog-uri is required for a jdbc catalog")
            conf[f"{cat}.type"] = "jdbc"
            conf[f"{cat}.uri"] = args.catalog_uri
            # V1: the iceberg_type column PyIceberg's SqlCatalog and lethe write; without it a
            # catalog Spark creates from nothing lacks that column.
            conf[f"{cat}.jdbc.schema-version"] = "V1"
            if args.jdbc_user:
                conf[f"{cat}.jdbc.user"] = args.jdbc_user
            if os.environ.get("LETHE_SPARK_JDBC_PASSWORD"):
                conf[f"{cat}.jdbc.password"] = os.environ["LETHE_SPARK_JDBC_PASSWORD"]
        elif args.catalog_type == "hadoop":
            if not args.warehouse:
                raise ToolError("--warehouse is required for a hadoop catalog")
            conf[f"{cat}.type"] = "hadoop"
        elif args.catalog_type == "rest":
            conf[f"{cat}.type"] = "rest"
            conf[f"{cat}.uri"] = args.catalog_uri
            if args.rest_credential_env:
                conf[f"{cat}.credential"] = os.environ[args.rest_credential_env]
        if args.s3_endpoint:
            # S3 through Hadoop's s3a (hadoop-aws + AWS SDK v1 bundle from spark-env.sh) for
            # s3:// and s3a:// locations; keys only from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY
            conf[f"{cat}.io-impl"] = "org.apache.iceberg.hadoop.HadoopFileIO"
            h = "spark.hadoop.fs.s3a"
            conf["spark.hadoop.fs.s3.impl"] = "org.apache.hadoop.fs.s3a.S3AFileSystem"
            conf["spark.hadoop.fs.s3a.impl"] = "org.apache.hadoop.fs.s3a.S3AFileSystem"
            conf[f"{h}.endpoint"] = args.s3_endpoint
            conf[f"{h}.endpoint.region"] = args.s3_region
            conf[f"{h}.path.style.access"] = "true"
            conf[f"{h}.connection.ssl.enabled"] = str(args.s3_endpoint.startswith("https:")).lower()
            conf[f"{h}.aws.credentials.provider"] = (
                "com.amazonaws.auth.EnvironmentVariableCredentialsProvider"
            )
        for kv in args.conf or []:
            k, _, v = kv.partition("=")
            conf[k.replace("{catalog}", cat)] = v
        t0 = time.monotonic()
        from pyspark.sql import SparkSession

        b = SparkSession.builder
        for k, v in conf.items():
            b = b.config(k, v)
        self.spark = None
        try:
            self.spark = b.getOrCreate()
            self.spark.sparkContext.setLogLevel("ERROR")
            # a trivial query so the start time includes the catalog's first connection
            self.spark.sql(f"SHOW NAMESPACES IN {name}").collect()
        except BaseException:
            self.stop()
            raise
        self.start_s = round(time.monotonic() - t0, 3)
        self.catalog = name
        self.versions = {
            "spark": self.spark.version,
            "iceberg": self._jvm.org.apache.iceberg.IcebergBuild.version(),
            "java": self._jvm.java.lang.System.getProperty("java.version"),
        }

    @property
    def _jvm(self):
        return self.spark.sparkContext._jvm

    def full(self, table: str) -> str:
        return f"{self.catalog}.{table}"

    def sql(self, q: str):
        return self.spark.sql(q).collect()

    def iceberg_table(self, table: str):
        return self._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            self.spark._jsparkSession, self.full(table)
        )

    def stop(self):
        try:
            if self.spark is not None:
                self.spark.stop()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


# ------------------------------------------------------------------------------- fixtures

KINDS = ("v2-cow", "v2-mor", "v3-dv")
SCHEMAS = {
    "v2": "event_id BIGINT, learner_id BIGINT, day DATE, score INT, note STRING",
    "v3": "event_id STRING, learner_id STRING, day DATE, score INT, note STRING",
}
MOR = {
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}


def generate(n: int, subject: str, v3: bool, commits: int = 3) -> list[dict]:
    rows = []
    base = dt.date(2024, 1, 1)
    others = [1000 + k for k in range(7)]
    for i in range(n):
        commit = i * commits // n
        if i % 5 == 0 and commit != commits - 1:
            learner = subject
        else:
            learner = str(others[i % 7])
            if learner == str(subject):
                learner = str(others[(i + 1) % 7])
        rows.append(
            {
                "event_id": f"e{i:06d}" if v3 else i,
                "learner_id": learner if v3 else int(learner),
                "day": (base + dt.timedelta(days=i % 3)).isoformat(),
                "score": i % 100,
                "note": f"n{i}",
                "_commit": commit,
            }
        )
    return rows


def load_rows(path: str) -> list[dict]:
    text = Path(path).read_text()
    stripped = text.lstrip()
    if stripped.startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def insert_rows(s: Session, table: str, schema: str, rows: list[dict]) -> None:
    """One INSERT (one commit) of rows given as JSON objects, typed by the DDL schema."""
    if not rows:
        return
    path = os.path.join(s.tmp, f"rows-{time.monotonic_ns()}.json")
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps({k: v for k, v in r.items() if k != "_commit"}) + "\n")
    df = s.spark.read.schema(schema).json(path)
    cols = [c.strip().split()[0] for c in schema.split(",")]
    df.select(*cols).writeTo(s.full(table)).append()


def default_ops(kind: str, first_commit_end: int | None) -> list[str]:
    if kind == "v2-cow":
        # only the first commit's files are rewritten, so files of the later commits (with and
        # without the subject) stay as they were written
        bound = f" AND event_id < {first_commit_end}" if first_commit_end is not None else ""
        return [f"DELETE FROM {{table}} WHERE event_id % 10 = 3{bound}"]
    if kind == "v2-mor":
        return [
            "DELETE FROM {table} WHERE event_id % 10 = 3",
            "UPDATE {table} SET score = score + 100 WHERE event_id % 10 = 7",
        ]
    num = "CAST(substr(event_id, 2) AS BIGINT)"
    return [
        f"DELETE FROM {{table}} WHERE {num} % 10 = 3",
        f"UPDATE {{table}} SET score = score + 100 WHERE {num} % 10 = 7",
    ]


def cmd_create_fixture(s: Session, a: argparse.Namespace) -> dict:
    kind = a.kind
    v3 = kind.startswith("v3")
    schema = SCHEMAS["v3" if v3 else "v2"] if not a.schema else a.schema
    if a.rows:
        rows = load_rows(a.rows)
    elif a.generate is not None:
        if a.subject is None:
            raise ToolError("--generate needs --subject")
        rows = generate(a.generate, a.subject, v3)
    else:
        raise ToolError("give --rows FILE or --generate N --subject ID")
    props = {"format-version": "3" if v3 else "2"}
    if kind in ("v2-mor", "v3-dv"):
        props.update(MOR)
    else:
        props.update({k: "copy-on-write" for k in MOR})
    for p in a.property or []:
        k, v = p.split("=", 1)
        props[k] = v
    partition = a.partition_by if a.partition_by is not None else ("" if v3 else "day")
    ns = a.table.rsplit(".", 1)[0]
    steps = []

    def step(label, fn):
        t = time.monotonic()
        fn()
        steps.append({"step": label, "seconds": round(time.monotonic() - t, 3)})

    full = s.full(a.table)
    step("create namespace", lambda: s.sql(f"CREATE NAMESPACE IF NOT EXISTS {s.full(ns)}"))
    tblprops = ", ".join(f"'{k}'='{v}'" for k, v in props.items())
    part_sql = f"PARTITIONED BY ({partition})" if partition else ""
    step(
        "create table",
        lambda: s.sql(f"CREATE TABLE {full} ({schema}) USING iceberg {part_sql} TBLPROPERTIES ({tblprops})"),
    )
    commits = sorted({int(r.get("_commit", 0)) for r in rows})
    for c in commits:
        batch = [r for r in rows if int(r.get("_commit", 0)) == c]
        step(f"insert commit {c} ({len(batch)} rows)", lambda b=batch: insert_rows(s, a.table, schema, b))
    first_end = None
    if a.generate is not None and not a.rows:
        first_end = sum(1 for r in rows if r["_commit"] == 0)
    ops = a.then if a.then else default_ops(kind, first_end)
    for op in ops:
        q = op.replace("{table}", full)
        step(q, lambda q=q: s.sql(q))
    added_default = None
    if kind == "v3-dv" and not a.then and not a.no_default_column:
        added_default = add_default_column(s, a.table, steps)
        n = a.generate if a.generate is not None else len(rows)
        extra = [
            {
                "event_id": f"e{n + i:06d}",
                "learner_id": str(1000 + i % 7) if str(1000 + i % 7) != str(a.subject) else "1007",
                "day": "2024-01-04",
                "score": i % 100,
                "note": f"n{n + i}",
                "channel": "app",
            }
            for i in range(max(1, n // 10))
        ]
        schema2 = schema + ", channel STRING"
        step(f"insert commit {len(commits)} ({len(extra)} rows, with channel)",
             lambda: insert_rows(s, a.table, schema2, extra))
    t = s.iceberg_table(a.table)
    out = {
        "table": a.table,
        "kind": kind,
        "format_version": int(t.properties().get("format-version") or _format_version(t)),
        "properties": {k: v for k, v in dict(t.properties()).items()},
        "partition_by": partition or None,
        "rows_given": len(rows),
        "operations": ops,
        "added_default_column": added_default,
        "steps": steps,
        "metadata_location": t.operations().current().metadataFileLocation(),
    }
    out.update(read_table(s, a.table, lineage=False, where=None))
    out["files"] = describe_files(s, a.table)
    return out


def _format_version(t) -> int:
    return t.operations().current().formatVersion()


def add_default_column(s: Session, table: str, steps: list) -> dict:
    """ADD COLUMN channel string with initial-default and write-default 'web' (Iceberg API)."""
    t0 = time.monotonic()
    jvm = s._jvm
    t = s.iceberg_table(table)
    lit = jvm.org.apache.iceberg.expressions.Literal.of("web")
    string_type = jvm.org.apache.iceberg.types.Types.StringType.get()
    t.updateSchema().addColumn("channel", string_type, "added with a default", lit).commit()
    s.sql(f"REFRESH TABLE {s.full(table)}")
    field = s.iceberg_table(table).schema().findField("channel")
    steps.append({"step": "add column channel default 'web'", "seconds": round(time.monotonic() - t0, 3)})
    return {
        "name": "channel",
        "initial_default": str(field.initialDefault()) if field.initialDefault() is not None else None,
        "write_default": str(field.writeDefault()) if field.writeDefault() is not None else None,
    }


# ----------------------------------------------------------------------------- reading


def read_table(s: Session, table: str, lineage: bool, where: str | None) -> dict:
    full = s.full(table)
    df = s.spark.table(full)
    cols = list(df.columns)
    sel = cols + (["_row_id", "_last_updated_sequence_number"] if lineage else [])
    q = f"SELECT {', '.join(f'`{c}`' for c in sel)} FROM {full}"
    if where:
        q += f" WHERE {where}"
    # Spark can't order by a map: the rows are ordered by the other columns.
    maps = {f.name for f in df.schema.fields if f.dataType.typeName() == "map"}
    q += " ORDER BY " + ", ".join(str(i + 1) for i, c in enumerate(sel) if c not in maps)
    rows = [r.asDict(recursive=True) for r in s.sql(q)]
    return {"columns": sel, "row_count": len(rows), "rows": rows}


def describe_files(s: Session, table: str) -> dict:
    full = s.full(table)
    meta = s.iceberg_table(table).operations().current()
    snap = meta.currentSnapshot()
    cols = [
        "content",
        "file_format",
        "file_path",
        "record_count",
        "file_size_in_bytes",
        "referenced_data_file",
        "content_offset",
        "content_size_in_bytes",
        "spec_id",
        "partition",
        "first_row_id",
    ]
    rows = []
    if snap is not None:
        have = set(s.spark.table(f"{full}.files").columns)
        sel = ", ".join(c for c in cols if c in have)
        rows = [
            r.asDict(recursive=True)
            for r in s.sql(f"SELECT {sel} FROM {full}.files ORDER BY file_path, content_offset")
        ]
    # which data files each delete file deletes from, read from the position_deletes metadata
    # table; a deletion vector is one blob of a Puffin file, so key by (path, content_offset)
    targets: dict[tuple, dict[str, int]] = {}
    if snap is not None and any(r["content"] == 1 for r in rows):
        pd_cols = set(s.spark.table(f"{full}.position_deletes").columns)
        off = "content_offset" if "content_offset" in pd_cols else "CAST(NULL AS BIGINT)"
        for r in s.sql(
            f"SELECT delete_file_path, {off} AS off, file_path, count(*) AS n "
            f"FROM {full}.position_deletes GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        ):
            targets.setdefault((r["delete_file_path"], r["off"]), {})[r["file_path"]] = r["n"]
    data = [r for r in rows if r["content"] == 0]
    deletes = [r for r in rows if r["content"] != 0]
    for r in deletes:
        hits = targets.get((r["file_path"], r.get("content_offset")), {})
        r["deletes_from"] = [{"data_file": k, "positions": v} for k, v in sorted(hits.items())]
    for r in rows:
        r["content_type"] = {0: "DATA", 1: "POSITION_DELETES", 2: "EQUALITY_DELETES"}[r["content"]]
        if r.get("partition") is not None and not isinstance(r["partition"], dict):
            r["partition"] = str(r["partition"])
    live = {r["file_path"] for r in data}
    dvs = [r for r in deletes if r["file_format"] == "PUFFIN"]
    puffin_files: dict[str, int] = {}
    for r in dvs:
        puffin_files[r["file_path"]] = puffin_files.get(r["file_path"], 0) + 1
    return {
        "snapshot_id": snap.snapshotId() if snap is not None else None,
        "sequence_number": snap.sequenceNumber() if snap is not None else None,
        "format_version": meta.formatVersion(),
        "next_row_id": meta.nextRowId() if meta.formatVersion() >= 3 else None,
        "data_files": data,
        "delete_files": deletes,
        "deletion_vectors": len(dvs),
        "puffin_files": [{"path": p, "vectors": n} for p, n in sorted(puffin_files.items())],
        "dangling_deletion_vectors": [r["file_path"] for r in dvs if r["referenced_data_file"] not in live],
        "dangling_delete_targets": sorted(
            {t["data_file"] for r in deletes for t in r["deletes_from"] if t["data_file"] not in live}
        ),
    }


def cmd_read_table(s: Session, a: argparse.Namespace) -> dict:
    out = {"table": a.table}
    out.update(read_table(s, a.table, lineage=a.with_row_lineage, where=a.where))
    return out


def cmd_describe_files(s: Session, a: argparse.Namespace) -> dict:
    out = {"table": a.table}
    out.update(describe_files(s, a.table))
    return out


def cmd_sql(s: Session, a: argparse.Namespace) -> dict:
    results = []
    for q in a.statement:
        t = time.monotonic()
        rows = [r.asDict(recursive=True) for r in s.sql(q)]
        results.append({"statement": q, "rows": rows, "seconds": round(time.monotonic() - t, 3)})
    return {"results": results}


# ------------------------------------------------------------------------------------ CLI


def add_catalog_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("catalog")
    g.add_argument("--catalog-type", choices=("jdbc", "hadoop", "rest"), default="jdbc")
    g.add_argument("--catalog-uri")
    g.add_argument("--catalog-name", default="lethe")
    g.add_argument("--warehouse")
    g.add_argument("--jdbc-user")
    g.add_argument("--rest-credential-env")
    g.add_argument("--jars")
    g.add_argument("--s3-endpoint", help="S3 endpoint for s3:// locations (path-style)")
    g.add_argument("--s3-region", default="us-east-1")
    g.add_argument(
        "--conf",
        action="append",
        help="extra Spark setting k=v; {catalog} in k stands for spark.sql.catalog.NAME",
    )


def command_parser(with_catalog: bool) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spark_tool.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def sp(name, fn):
        p = sub.add_parser(name)
        if with_catalog:
            add_catalog_options(p)
        p.set_defaults(fn=fn)
        return p

    p = sp("create-fixture", cmd_create_fixture)
    p.add_argument("--table", required=True)
    p.add_argument("--kind", required=True, choices=KINDS)
    p.add_argument("--rows")
    p.add_argument("--generate", type=int)
    p.add_argument("--subject")
    p.add_argument("--schema", help="DDL column list for --rows (default: the kind's schema)")
    p.add_argument("--partition-by", help="partition spec, '' for none (default: day for v2)")
    p.add_argument("--property", action="append", help="extra table property k=v")
    p.add_argument("--then", action="append", help="row operation replacing the defaults")
    p.add_argument("--no-default-column", action="store_true")
    p = sp("read-table", cmd_read_table)
    p.add_argument("--table", required=True)
    p.add_argument("--with-row-lineage", action="store_true")
    p.add_argument("--where")
    p = sp("describe-files", cmd_describe_files)
    p.add_argument("--table", required=True)
    p = sp("sql", cmd_sql)
    p.add_argument("--statement", action="append", required=True)
    p = sp("batch", None)
    p.add_argument("file")
    return parser


def run_one(s: Session, a: argparse.Namespace) -> dict:
    t = time.monotonic()
    try:
        out = a.fn(s, a)
        ok = True
    except Exception as e:  # reported as JSON, the caller decides
        out = {"error": _error_text(e)}
        ok = False
    out["command"] = a.command
    out["timing"] = {"spark_start_s": s.start_s, "command_s": round(time.monotonic() - t, 3)}
    out["versions"] = s.versions
    return out if ok else {**out, "ok": False}


def _error_text(e: Exception) -> str:
    text = str(e)
    # py4j errors carry a Java stack trace: keep the first lines and every "Caused by"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    keep = lines[:4] + [ln for ln in lines[4:] if ln.startswith("Caused by")]
    return " | ".join(keep)[:3000] or type(e).__name__


def main(argv: list[str]) -> int:
    t_all = time.monotonic()
    sys.stdout = _JSON_OUT  # --help and usage text go to the real stdout
    try:
        a = command_parser(with_catalog=True).parse_args(argv)
    finally:
        sys.stdout = sys.stderr
    s = None
    try:
        s = Session(a)
        if a.command == "batch":
            sub = command_parser(with_catalog=False)
            failed = False
            for line in Path(a.file).read_text().splitlines():
                if not line.strip():
                    continue
                args = json.loads(line)
                ba = sub.parse_args(args if isinstance(args, list) else shlex.split(args))
                out = run_one(s, ba)
                failed |= out.get("ok") is False
                emit(out)
            return 1 if failed else 0
        out = run_one(s, a)
        out["timing"]["total_s"] = round(time.monotonic() - t_all, 3)
        emit(out)
        return 1 if out.get("ok") is False else 0
    except ToolError as e:
        emit({"error": str(e), "ok": False, "command": a.command})
        return 1
    except Exception as e:
        emit({"error": _error_text(e), "ok": False, "command": a.command})
        return 1
    finally:
        if s is not None:
            s.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
