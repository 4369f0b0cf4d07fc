//! Benchmark: erasing one subject from a merge-on-read table (10% of its rows deleted by
//! position deletes, as Trino's DELETE leaves them; or, format v3, by deletion vectors, as
//! Spark's DELETE leaves them) vs the same live rows compacted.
//!
//! ```text
//! mor_bench setup <dir> [rows=1000000] [files=10]        # builds the tables (not timed)
//! mor_bench erase <dir> mor|compacted|dv|v3_compacted    # the erasure's row delete, timed
//! ```
//!
//! `setup` writes, in format v2, `bench.orders_mor` (`rows` orders in `files` data files, then
//! one position delete file per data file naming every tenth order) and
//! `bench.orders_compacted` (the same live rows, no delete file); in format v3,
//! `bench.orders_dv` (the same data files, then one DELETE hiding every tenth order with one
//! deletion vector per data file, all in one Puffin file) and `bench.orders_v3_compacted`.
//! `erase` deletes customer 4242's orders (one in every 50,000, spread over every file) with the
//! copy-on-write row delete an erasure runs, and prints one JSON line: seconds, files read and
//! rewritten, rows matched and purged, delete files and deletion vectors removed. Run each
//! `erase` under `/usr/bin/time -v` for its peak memory; run `setup` again before repeating
//! (the erase changes the table).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema};
use iceberg::spec::{FormatVersion, NestedField, PrimitiveType, Schema, Type};
use lethe::config::Config;
use lethe::workspace::Workspace;
use lethe_demo::fixtures::{GovernanceFiles, delete_by_position, delete_by_vector, init_workspace};
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::rewrite::{RowRewrite, append, count_rows, rewrite_rows};
use lethe_iceberg::predicate::{Predicate, Value};
use lethe_iceberg::writer::WriteOptions;

const CUSTOMERS: i64 = 50_000;
const SUBJECT: i64 = 4242;

fn schema() -> Schema {
    let f = |id, name: &str, p| Arc::new(NestedField::optional(id, name, Type::Primitive(p)));
    Schema::builder()
        .with_fields(vec![
            Arc::new(NestedField::required(
                1,
                "order_id",
                Type::Primitive(PrimitiveType::Long),
            )),
            f(2, "customer_id", PrimitiveType::Long),
            f(3, "shard", PrimitiveType::Long),
            f(4, "email", PrimitiveType::String),
            f(5, "amount", PrimitiveType::Double),
        ])
        .build()
        .expect("schema")
}

fn batch(ids: &[i64]) -> RecordBatch {
    RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![
            Field::new("order_id", DataType::Int64, false),
            Field::new("customer_id", DataType::Int64, true),
            Field::new("shard", DataType::Int64, true),
            Field::new("email", DataType::Utf8, true),
            Field::new("amount", DataType::Float64, true),
        ])),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(Int64Array::from(
                ids.iter().map(|o| o % CUSTOMERS).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                ids.iter().map(|o| o % 10).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                ids.iter()
                    .map(|o| Some(format!("customer{}@example.org", o % CUSTOMERS)))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from(
                ids.iter().map(|o| *o as f64 * 0.25).collect::<Vec<_>>(),
            )),
        ],
    )
    .expect("batch")
}

async fn setup(dir: &Path, rows: i64, files: i64) -> lethe::Result<()> {
    if dir.join("lethe.toml").exists() {
        std::fs::remove_dir_all(dir).map_err(|e| lethe::Error::io(dir.display().to_string(), e))?;
    }
    let ws = init_workspace(dir, GovernanceFiles::default())?;
    let wh = &ws.warehouse;
    let per_file = (rows / files).max(1);
    for (table, compacted, version) in [
        ("bench.orders_mor", false, FormatVersion::V2),
        ("bench.orders_compacted", true, FormatVersion::V2),
        ("bench.orders_dv", false, FormatVersion::V3),
        ("bench.orders_v3_compacted", true, FormatVersion::V3),
    ] {
        let name = TableName::parse(table)?;
        wh.create_table(&name, schema(), None, None, Default::default(), version)
            .await?;
        let mut start = 0;
        while start < rows {
            let end = (start + per_file).min(rows);
            let ids: Vec<i64> = (start..end).filter(|o| !compacted || o % 10 != 0).collect();
            append(
                wh,
                &name,
                &[batch(&ids)],
                BTreeMap::new(),
                WriteOptions {
                    max_rows_per_file: None,
                },
            )
            .await?;
            start = end;
        }
        if !compacted && version == FormatVersion::V3 {
            // One DELETE: a vector per data file, all in one Puffin file (Spark's layout).
            delete_by_vector(wh, &name, &Predicate::eq("shard", Value::Int(0))).await?;
        } else if !compacted {
            // One DELETE statement per file's worth of rows, as a stream of deletes leaves them.
            let mut start = 0;
            while start < rows {
                let end = (start + per_file).min(rows);
                let p = Predicate::eq("shard", Value::Int(0))
                    .and(Predicate::cmp(
                        "order_id",
                        lethe_iceberg::predicate::CmpOp::GtEq,
                        Value::Int(start),
                    ))
                    .and(Predicate::cmp(
                        "order_id",
                        lethe_iceberg::predicate::CmpOp::Lt,
                        Value::Int(end),
                    ));
                delete_by_position(wh, &name, &p, false).await?;
                start = end;
            }
        }
        let t = wh.load(&name).await?;
        let (_, live) = count_rows(wh, &t, &Predicate::True).await?;
        let stored = wh.current_files(&t).await?;
        println!(
            "{{\"table\":\"{table}\",\"live_rows\":{live},\"data_files\":{},\"delete_files\":{}}}",
            stored.iter().filter(|f| f.is_data()).count(),
            stored.iter().filter(|f| !f.is_data()).count()
        );
    }
    Ok(())
}

async fn erase(dir: &Path, variant: &str) -> lethe::Result<()> {
    let ws = Workspace::open(&Config::load(&dir.join("lethe.toml"))?)?;
    let name = TableName::parse(&format!("bench.orders_{variant}"))?;
    let started = Instant::now();
    let r = rewrite_rows(
        &ws.warehouse,
        &name,
        &RowRewrite::delete(Predicate::eq("customer_id", Value::Int(SUBJECT)))
            .with_summary("erasure-request", "bench"),
    )
    .await?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{{\"variant\":\"{variant}\",\"seconds\":{seconds:.3},\"files_in_table\":{},\"files_read\":{},\"files_rewritten\":{},\"rows_matched\":{},\"rows_purged\":{},\"rows_rewritten\":{},\"delete_files_removed\":{},\"delete_files_rewritten\":{},\"deletion_vectors_removed\":{}}}",
        r.files_in_table,
        r.files_read,
        r.files_rewritten.len(),
        r.rows_matched,
        r.rows_purged,
        r.rows_rewritten,
        r.delete_files_removed.len(),
        r.delete_files_rewritten.len(),
        r.deletion_vectors_removed
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: mor_bench setup <dir> [rows] [files] | mor_bench erase <dir> mor|compacted|dv|v3_compacted";
    let result = match args.first().map(String::as_str) {
        Some("setup") if args.len() >= 2 => {
            let rows = args
                .get(2)
                .and_then(|s| s.parse().ok())
                .unwrap_or(1_000_000);
            let files = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(10);
            setup(Path::new(&args[1]), rows, files).await
        }
        Some("erase")
            if args.len() == 3
                && ["mor", "compacted", "dv", "v3_compacted"].contains(&args[2].as_str()) =>
        {
            erase(Path::new(&args[1]), &args[2]).await
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("mor_bench: {e}");
        std::process::exit(1);
    }
}
