"""Spark's side of the batch benchmark (scripts/bench_batch.sh): what a Spark user runs to erase a
batch of subjects from the demo's warehouse with Spark 3.5 + Iceberg 1.10, on an identical copy.

usage: bench_batch_spark.py CATALOG_DB WAREHOUSE DRY_RUN_JSON

DRY_RUN_JSON is `lethe erase --subjects-file F --dry-run --json` on the copy (made before the
timing starts): its journal's steps give each table's selection — `column IN (values)`, OR-ed
with each further selector (`also`) whose values the plan resolved — which are the statements a
Spark user who knew the batch's rows would write:
  DELETE     DELETE FROM t WHERE <selection>
  REWRITE    UPDATE t SET <erased columns> = NULL WHERE <selection>
  RECOMPUTE  INSERT OVERWRITE t SELECT * FROM t  (stands in for rerunning the pipeline; a
             rerun reads its inputs and costs no less; the compare leaves these tables out)
then, for every table changed, the Iceberg procedures a Spark user runs afterwards:
  CALL lethe.system.expire_snapshots(table, older_than => now, retain_last => 1)
  CALL lethe.system.rewrite_manifests(table)
  DeleteOrphanFiles (older than now) through Iceberg's action API: the remove_orphan_files
  procedure refuses an interval under 24 hours and its error points to that API
The catalog is the JDBC catalog on the same SQLite file lethe uses (catalog name `lethe`),
`local[2]`. Prints one JSON line: Spark's start-up (session created, catalog reachable), the
statements' time, the procedures' time, and in_job_seconds (statements + procedures).
"""
import datetime
import json
import os
import sys
import time

START = time.perf_counter()

from pyspark.sql import SparkSession  # noqa: E402


def literal(v):
    if v["type"] == "str":
        return "'" + v["value"].replace("'", "''") + "'"
    if v["type"] in ("int", "long"):
        return str(int(v["value"]))
    raise SystemExit(f"unsupported selection value type {v['type']}")


def selection(step):
    parts = []
    sels = [(step["column"], step["values"])] + [(a["column"], a["values"]) for a in step.get("also", [])]
    for column, values in sels:
        if values:
            parts.append(f"`{column}` IN ({', '.join(literal(v) for v in values)})")
    return " OR ".join(parts)


def remove_orphans(spark, table, older_than_ms):
    """Iceberg's DeleteOrphanFiles action on `table` (ns.t) for files older than the given
    time: the procedure `remove_orphan_files` refuses an interval under 24 hours and its error
    sends the user to this action API."""
    jvm = spark._jvm
    t = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"lethe.{table}")
    result = (
        jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
        .deleteOrphanFiles(t)
        .olderThan(older_than_ms)
        .execute()
    )
    return sum(1 for _ in result.orphanFileLocations())


def session(db, warehouse):
    jars = os.environ["LETHE_SPARK_JARS"]
    return (
        SparkSession.builder.master("local[2]")
        .appName("lethe-bench-batch")
        .config("spark.jars", jars)
        .config("spark.driver.memory", os.environ.get("LETHE_SPARK_DRIVER_MEMORY", "4g"))
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.catalog.lethe", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.lethe.type", "jdbc")
        .config("spark.sql.catalog.lethe.uri", f"jdbc:sqlite:{db}")
        .config("spark.sql.catalog.lethe.warehouse", f"file://{warehouse}")
        .config("spark.sql.catalog.lethe.jdbc.schema-version", "V1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )


def main() -> int:
    db, warehouse, dry_path = sys.argv[1:]
    with open(dry_path) as f:
        steps = json.load(f)["journal"]["steps"]
    spark = session(db, warehouse)
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("SHOW NAMESPACES IN lethe").collect()
    started = time.perf_counter()
    changed = []
    for step in steps:
        action, name = step["action"], f"lethe.{step['table']}"
        if action == "RECOMPUTE":
            spark.sql(f"INSERT OVERWRITE {name} SELECT * FROM {name}")
        elif action in ("DELETE", "REWRITE"):
            where = selection(step)
            if not where:
                continue
            if action == "DELETE":
                spark.sql(f"DELETE FROM {name} WHERE {where}")
            else:
                sets = ", ".join(f"`{c}` = NULL" for c in step["erase_columns"])
                spark.sql(f"UPDATE {name} SET {sets} WHERE {where}")
        else:
            continue
        changed.append(step["table"])
    statements_done = time.perf_counter()
    now = spark.sql("SELECT current_timestamp()").collect()[0][0]
    ts = now.strftime("%Y-%m-%d %H:%M:%S.%f")
    now_ms = int(now.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
    removed = 0
    for t in changed:
        spark.sql(
            f"CALL lethe.system.expire_snapshots(table => '{t}', older_than => TIMESTAMP '{ts}', retain_last => 1)"
        ).collect()
        spark.sql(f"CALL lethe.system.rewrite_manifests(table => '{t}')").collect()
        removed += remove_orphans(spark, t, now_ms)
    end = time.perf_counter()
    print(json.dumps({
        "tables_changed": len(changed),
        "orphans_removed": removed,
        "startup_seconds": started - START,
        "statements_seconds": statements_done - started,
        "procedures_seconds": end - statements_done,
        "in_job_seconds": end - started,
        "since_start_seconds": end - START,
    }))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
