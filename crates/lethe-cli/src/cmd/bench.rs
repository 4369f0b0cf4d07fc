//! `lethe bench ...`: set-ups and timed operations for BENCHMARKS.md (hidden from --help).
//!
//! Each prints one JSON object, so scripts/bench.sh can put lethe's figures side by side with
//! PyIceberg's from the same run.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use clap::Subcommand;
use iceberg::spec::{FormatVersion, NestedField, PrimitiveType, Schema, Type};
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::rewrite::{RowRewrite, append, rewrite_rows};
use lethe_iceberg::predicate::{Predicate, Value};
use lethe_iceberg::writer::WriteOptions;
use lethe_lineage::{
    ColumnLineageDatasetFacet, GraphBuilder, InputDataset, InputField, Job, OutputDataset,
    RunEvent, Transformation,
};
use rand::{Rng, SeedableRng};

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Create an events table sorted by learner_id, in files of --file-rows rows.
    Events {
        /// The table to create.
        #[arg(long)]
        table: String,
        /// Rows.
        #[arg(long)]
        rows: u64,
        /// Rows per file.
        #[arg(long, default_value_t = 100_000)]
        file_rows: u64,
        /// Events per learner.
        #[arg(long, default_value_t = 20)]
        per_learner: u64,
    },
    /// Delete one learner's rows from a table (learner_id = ID), timed.
    Delete {
        /// The table.
        #[arg(long)]
        table: String,
        /// The learner.
        #[arg(long)]
        learner: i64,
    },
    /// Scan the warehouse for a real learner's traces alone, then among N synthetic subjects,
    /// alternately, `--rounds` times each; the ratio is of the best times (the first scan of a
    /// process pays a warm-up the later ones don't).
    Scan {
        /// The real learner.
        #[arg(long, default_value_t = 3590)]
        learner: i64,
        /// Subjects in the second run.
        #[arg(long, default_value_t = 1000)]
        subjects: usize,
        /// How many times each scan runs (one subject, then all, alternately).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
        rounds: u32,
    },
    /// Erase N learners (3590 first) from the demo with stores in one batch, then rebuild the
    /// search index and verify; prints the time per system (the demo's vendor is served by this
    /// process).
    Stores {
        /// Requests in the batch.
        #[arg(long, default_value_t = 1)]
        requests: usize,
    },
    /// Write N empty objects under a location of the workspace's store (the listing
    /// benchmark's objects), 64 at a time.
    Objects {
        /// Where (`s3://bucket/prefix`).
        #[arg(long)]
        prefix: String,
        /// How many.
        #[arg(long)]
        count: u64,
        /// Writes in flight.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
    },
    /// The physical floor of a batch erasure: plans the batch of --subjects-file (a dry run,
    /// not timed), finds the data files its DELETE and REWRITE steps would rewrite (and the
    /// current files of each RECOMPUTE's table, which a rerun replaces), then times reading
    /// each whole with lethe's reader and writing it again with lethe's writer (the table's
    /// codec and row-group size), as many files at once as the machine has cores. The files
    /// written are removed afterwards; nothing is committed. Prints one JSON object.
    Floor {
        /// One `REQUEST NAME=ID` per line, as `lethe erase --subjects-file`.
        #[arg(long)]
        subjects_file: std::path::PathBuf,
    },
    /// A plain parallel GET of every object under a prefix of the workspace's store: the raw
    /// read speed the proof scan is compared with. Lists the prefix, then reads each object
    /// whole, --concurrency at a time (default: the machine's cores, as many as the scan's
    /// workers), and prints the objects, bytes and seconds (the listing timed apart).
    Get {
        /// Where (`s3://bucket/prefix`, or a folder).
        #[arg(long)]
        prefix: String,
        /// Reads in flight (0: the machine's cores).
        #[arg(long, default_value_t = 0)]
        concurrency: usize,
    },
    /// Plan an erasure on a generated catalog and lineage graph, timed.
    Plan {
        /// Datasets.
        #[arg(long, default_value_t = 100_000)]
        datasets: usize,
        /// Column edges.
        #[arg(long, default_value_t = 1_000_000)]
        edges: usize,
        /// Seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
}

pub async fn run(c: BenchCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    match c {
        BenchCommand::Objects {
            prefix,
            count,
            concurrency,
        } => {
            use futures::StreamExt;
            let ws = super::workspace(config)?;
            let io = ws.warehouse.store.file_io().clone();
            let prefix = prefix.trim_end_matches('/').to_string();
            let started = Instant::now();
            let mut writes = futures::stream::iter(0..count)
                .map(|i| {
                    let io = io.clone();
                    let loc = format!("{prefix}/o{i:08}");
                    async move { io.new_output(&loc)?.write(bytes::Bytes::new()).await }
                })
                .buffer_unordered(concurrency.max(1));
            let mut done = 0u64;
            while let Some(r) = writes.next().await {
                r?;
                done += 1;
                if done.is_multiple_of(50_000) {
                    eprintln!("{done} objects written");
                }
            }
            println!(
                "{}",
                serde_json::json!({"objects": done, "seconds": started.elapsed().as_secs_f64()})
            );
        }
        BenchCommand::Events {
            table,
            rows,
            file_rows,
            per_learner,
        } => {
            let ws = super::workspace(config)?;
            let name = TableName::parse(&table)?;
            let schema = Schema::builder()
                .with_fields(vec![
                    NestedField::required(1, "event_id", Type::Primitive(PrimitiveType::Long))
                        .into(),
                    NestedField::optional(2, "learner_id", Type::Primitive(PrimitiveType::Long))
                        .into(),
                    NestedField::optional(3, "course_id", Type::Primitive(PrimitiveType::Long))
                        .into(),
                    NestedField::optional(4, "kind", Type::Primitive(PrimitiveType::String)).into(),
                    NestedField::optional(5, "ip_address", Type::Primitive(PrimitiveType::String))
                        .into(),
                    NestedField::optional(
                        6,
                        "occurred_at",
                        Type::Primitive(PrimitiveType::Timestamp),
                    )
                    .into(),
                ])
                .build()?;
            ws.warehouse
                .create_table(&name, schema, None, None, HashMap::new(), FormatVersion::V2)
                .await?;
            let started = Instant::now();
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
            let mut start = 0u64;
            let mut files = 0;
            while start < rows {
                let n = file_rows.min(rows - start);
                let ids: Vec<i64> = (start..start + n).map(|i| i as i64 + 1).collect();
                let learners: Vec<i64> = (start..start + n)
                    .map(|i| (i / per_learner) as i64 + 1)
                    .collect();
                let b = RecordBatch::try_from_iter(vec![
                    ("event_id", Arc::new(Int64Array::from(ids)) as ArrayRef),
                    ("learner_id", Arc::new(Int64Array::from(learners))),
                    (
                        "course_id",
                        Arc::new(Int64Array::from(
                            (0..n)
                                .map(|_| rng.random_range(1..500))
                                .collect::<Vec<i64>>(),
                        )),
                    ),
                    (
                        "kind",
                        Arc::new(StringArray::from(
                            (0..n)
                                .map(|_| ["view", "play", "quiz_submit"][rng.random_range(0..3)])
                                .collect::<Vec<_>>(),
                        )),
                    ),
                    (
                        "ip_address",
                        Arc::new(StringArray::from(
                            (0..n)
                                .map(|_| {
                                    format!(
                                        "10.{}.{}.{}",
                                        rng.random_range(0..256),
                                        rng.random_range(0..256),
                                        rng.random_range(1..255)
                                    )
                                })
                                .collect::<Vec<_>>(),
                        )),
                    ),
                    (
                        "occurred_at",
                        Arc::new(TimestampMicrosecondArray::from(
                            (0..n)
                                .map(|_| {
                                    1_704_067_200_000_000i64
                                        + rng.random_range(0..86_400_000_000i64 * 900)
                                })
                                .collect::<Vec<_>>(),
                        )),
                    ),
                ])?;
                append(
                    &ws.warehouse,
                    &name,
                    &[b],
                    BTreeMap::new(),
                    WriteOptions {
                        max_rows_per_file: Some(file_rows as usize),
                    },
                )
                .await?;
                start += n;
                files += 1;
            }
            println!(
                "{}",
                serde_json::json!({ "table": table, "rows": rows, "files": files, "seconds": started.elapsed().as_secs_f64() })
            );
        }
        BenchCommand::Delete { table, learner } => {
            let ws = super::workspace(config)?;
            let started = Instant::now();
            let r = rewrite_rows(
                &ws.warehouse,
                &TableName::parse(&table)?,
                &RowRewrite::delete(Predicate::eq("learner_id", Value::Int(learner))),
            )
            .await?;
            println!(
                "{}",
                serde_json::json!({
                    "table": table,
                    "seconds": started.elapsed().as_secs_f64(),
                    "files_in_table": r.files_in_table,
                    "files_read": r.files_read,
                    "files_rewritten": r.files_rewritten.len(),
                    "rows_deleted": r.rows_matched,
                    "rows_in_table": r.rows_in_table,
                })
            );
        }
        BenchCommand::Plan {
            datasets,
            edges,
            seed,
        } => plan_bench(datasets, edges, seed)?,
        BenchCommand::Stores { requests } => stores_bench(config, requests).await?,
        BenchCommand::Get {
            prefix,
            concurrency,
        } => get_bench(config, &prefix, concurrency)?,
        BenchCommand::Floor { subjects_file } => floor_bench(config, &subjects_file).await?,
        BenchCommand::Scan {
            learner,
            subjects,
            rounds,
        } => {
            let ws = super::workspace(config)?;
            let gov = ws.governance()?;
            let req = lethe::erasure::case::RequestSpec {
                request: "bench".into(),
                subject: "learner".into(),
                id: learner.to_string(),
            };
            let real = lethe::erasure::erase::prepare(&ws, &gov, &[req], None, &|_| {})
                .await?
                .cases;
            let mut many = real.clone();
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
            for i in 1..subjects {
                let mut c = lethe::erasure::case::CaseFile {
                    request: format!("synthetic-{i}"),
                    subject: "learner".into(),
                    ..Default::default()
                };
                c.ids.insert(
                    "learner_id".into(),
                    vec![(10_000_000 + i as i64).to_string()],
                );
                for (kind, v) in [
                    (
                        "email",
                        format!(
                            "synthetic.{i}.{}@nowhere.example",
                            rng.random_range(0..1_000_000)
                        ),
                    ),
                    (
                        "full_name",
                        format!("Synthetic {} Person{i}", rng.random_range(0..1_000_000)),
                    ),
                    (
                        "phone",
                        format!("+99 {:04} {:06}", rng.random_range(0..10_000), i),
                    ),
                ] {
                    c.values.push(lethe::erasure::case::ValueTrace {
                        kind: kind.into(),
                        value: v,
                    });
                }
                many.push(c);
            }
            let (mut one_runs, mut all_runs) = (Vec::new(), Vec::new());
            let mut same = true;
            let mut one_report = None;
            for _ in 0..rounds {
                let one = lethe::erasure::prove::prove(&ws, &real, &|_| {}).await?;
                let all = lethe::erasure::prove::prove(&ws, &many, &|_| {}).await?;
                same &= one.hits.len() == all.hits.iter().filter(|h| h.request == "bench").count();
                one_runs.push(one.seconds);
                all_runs.push(all.seconds);
                one_report = Some(one);
            }
            let one = one_report.expect("rounds >= 1");
            let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
            let (one_best, all_best) = (best(&one_runs), best(&all_runs));
            println!(
                "{}",
                serde_json::json!({
                    "files": one.files_read,
                    "bytes": one.bytes_read,
                    "rounds": rounds,
                    "one_subject_seconds": one_best,
                    "one_subject_runs": one_runs,
                    "subjects": subjects,
                    "many_subjects_seconds": all_best,
                    "many_subjects_runs": all_runs,
                    "ratio": all_best / one_best,
                    "one_subject_bytes_per_second": one.bytes_read as f64 / one_best,
                    "real_subject_hits_same": same,
                })
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A layered catalog: 10 source tables with learner_id, then derived tables fed by earlier
/// ones; column edges are IDENTITY copies of the ID into `lid` (about 5% of tables),
/// transformations and filters.
fn plan_bench(datasets: usize, edges: usize, seed: u64) -> anyhow::Result<()> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let sources = 10usize.min(datasets);
    let name = |i: usize| {
        if i < sources {
            format!("src.t{i}")
        } else {
            format!("d{}.t{i}", i % 100)
        }
    };
    let cols = 8usize;
    let mut inv = lethe::erasure::plan::Inventory::default();
    for i in 0..datasets {
        // Sources hold learner_id; derived tables hold copies under another name.
        let id_col = if i < sources { "learner_id" } else { "lid" };
        let mut columns = vec![(id_col.to_string(), "long".to_string())];
        columns.extend((1..cols).map(|c| (format!("c{c}"), "string".to_string())));
        inv.tables.insert(
            name(i),
            lethe::erasure::plan::TableInfo {
                columns,
                ..Default::default()
            },
        );
    }
    // One run (event) per derived dataset, its edges spread over the derived datasets.
    let derived = datasets - sources;
    let per = edges / derived.max(1);
    let ns = "file:///warehouse";
    let t0 = Instant::now();
    let mut events = Vec::with_capacity(derived);
    for i in sources..datasets {
        let mut facet = ColumnLineageDatasetFacet::new("https://example.org/bench");
        let mut inputs = BTreeSet::new();
        for k in 0..per {
            let from = rng.random_range(0..i);
            inputs.insert(from);
            let (from_col, to_col, t) = if k == 0 && rng.random_bool(0.05) {
                let from_col = if from < sources { "learner_id" } else { "lid" };
                (
                    from_col.to_string(),
                    "lid".to_string(),
                    Transformation::direct("IDENTITY"),
                )
            } else {
                (
                    format!("c{}", rng.random_range(1..cols)),
                    format!("c{}", rng.random_range(1..cols)),
                    if rng.random_bool(0.7) {
                        Transformation::direct("TRANSFORMATION")
                    } else {
                        Transformation::indirect("FILTER")
                    },
                )
            };
            facet = facet.with_field(to_col, [InputField::new(ns, name(from), from_col, [t])]);
        }
        let mut ev = RunEvent::complete(
            "https://example.org/bench",
            Job::new("bench", format!("job{i}")),
            uuid::Uuid::from_u128(i as u128),
            chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap_or_default(),
        );
        for from in inputs {
            ev = ev.with_input(InputDataset::new(ns, name(from)));
        }
        events.push(ev.with_output(OutputDataset::new(ns, name(i)).with_column_lineage(facet)));
    }
    let generate = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let tables: BTreeSet<String> = inv.tables.keys().cloned().collect();
    let mut builder =
        GraphBuilder::new(move |_ns: &str, n: &str| tables.contains(n).then(|| n.to_string()));
    for ev in &events {
        builder.add_event("bench.jsonl", ev)?;
    }
    let graph = builder.finish()?;
    let build = t1.elapsed().as_secs_f64();
    drop(events);
    let dir = tempfile_dir()?;
    std::fs::write(
        dir.join("subjects.toml"),
        "[learner]\nidentifiers = [\"src.t0.learner_id\"]\n",
    )?;
    let gov = lethe::governance::Governance::load(&dir)?;
    let tw = Instant::now();
    let w = lethe_lineage::walk(
        &graph,
        chrono::DateTime::<chrono::Utc>::MIN_UTC,
        &[lethe_lineage::Seed::new(
            "src.t0",
            "learner_id",
            "learner_id",
        )],
        |_| Vec::new(),
    );
    let walk_seconds = tw.elapsed().as_secs_f64();
    let reached = w.len();
    drop(w);
    let t2 = Instant::now();
    let plan = lethe::erasure::plan::plan(&inv, &gov, &graph, "learner", None, &BTreeSet::new())?;
    let planning = t2.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "{}",
        serde_json::json!({
            "datasets": datasets,
            "column_edges": graph.edge_count(),
            "generate_seconds": generate,
            "graph_build_seconds": build,
            "plan_seconds": planning,
            "walk_only_seconds": walk_seconds,
            "walk_reached": reached,
            "steps": plan.steps.len(),
            "unresolved": plan.coverage.unresolved,
        })
    );
    Ok(())
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("lethe-bench-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// `lethe bench stores`: one batch of `n` requests through every store of the demo.
async fn stores_bench(config: Option<&Path>, n: usize) -> anyhow::Result<()> {
    let ws = super::workspace(config)?;
    let url = lethe_demo::platform::vendor_url(&ws.config.root)?
        .ok_or_else(|| anyhow::anyhow!("a demo with stores is needed (lethe demo init)"))?;
    let port: u16 = url.rsplit(':').next().unwrap_or("0").parse()?;
    let _vendor = lethe_demo::platform::vendor::Vendor::start(&ws.config.root, port).await?;
    let mut ids: Vec<i64> = vec![lethe_demo::platform::data::DEMO_LEARNER];
    ids.extend(
        (1..)
            .filter(|i| *i != lethe_demo::platform::data::DEMO_LEARNER)
            .take(n - 1),
    );
    let requests: Vec<lethe::erasure::case::RequestSpec> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| lethe::erasure::case::RequestSpec {
            request: format!("bench-{i:05}"),
            subject: "learner".into(),
            id: id.to_string(),
        })
        .collect();
    let opts = lethe::erasure::erase::EraseOptions {
        dry_run: false,
        min_age: Some(chrono::Duration::zero()),
        accept_incomplete: false,
        key_file: None,
        day: None,
    };
    let t = Instant::now();
    let r = lethe::erasure::erase::erase(&ws, &requests, &opts, &|_| {}).await?;
    let erase_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    lethe_demo::platform::rebuild_index(&ws).await?;
    let rebuild_s = t.elapsed().as_secs_f64();
    let mut j = r.journal;
    let t = Instant::now();
    lethe::erasure::erase::verify_pending(&ws, &mut j, chrono::Utc::now().date_naive(), &|_| {})
        .await?;
    let verify_s = t.elapsed().as_secs_f64();
    let mut systems = BTreeMap::new();
    for s in &j.stores {
        systems.insert(
            s.store.clone(),
            serde_json::json!({
                "ms": s.duration_ms,
                "deletes": s.deletes,
                "records": s.records.values().sum::<u64>(),
                "state": s.state.to_string(),
            }),
        );
    }
    let ms = |a: &Option<String>, b: &Option<String>| -> Option<i64> {
        let a = chrono::DateTime::parse_from_rfc3339(a.as_deref()?).ok()?;
        let b = chrono::DateTime::parse_from_rfc3339(b.as_deref()?).ok()?;
        Some((b - a).num_milliseconds())
    };
    let mut steps_ms = 0i64;
    for s in &j.steps {
        if let Some(d) = ms(&s.started_at, &s.finished_at) {
            steps_ms += d;
            systems.insert(
                s.table.clone(),
                serde_json::json!({ "ms": d, "records": s.rows, "state": if s.done { "done" } else { "planned" } }),
            );
        }
    }
    let stores_ms: u64 = j.stores.iter().map(|s| s.duration_ms).sum();
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "requests": n,
            "erase_seconds": erase_s,
            "warehouse_steps_ms": steps_ms,
            "stores_ms": stores_ms,
            "plan_register_cleanup_ms": (erase_s * 1000.0) as i64 - steps_ms - stores_ms as i64,
            "index_rebuild_seconds": rebuild_s,
            "verify_seconds": verify_s,
            "systems": systems,
        }))?
    );
    Ok(())
}

/// The files a batch's steps would rewrite, by table (see [`BenchCommand::Floor`]).
async fn files_to_rewrite(
    ws: &lethe::workspace::Workspace,
    subjects_file: &Path,
) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    use lethe::erasure::erase::{EraseOptions, erase, selection_predicate};
    use lethe::erasure::plan::Action;
    let requests = lethe::erasure::case::parse_subjects_file(subjects_file)?;
    let opts = EraseOptions {
        dry_run: true,
        min_age: None,
        accept_incomplete: true,
        key_file: None,
        day: None,
    };
    let planned = erase(ws, &requests, &opts, &|_| {}).await?;
    let mut out = BTreeMap::new();
    for step in &planned.journal.steps {
        let name = TableName::parse(&step.table)?;
        let files = match step.action {
            Action::Delete | Action::Rewrite => {
                let Some(p) = selection_predicate(step.selections()) else {
                    continue;
                };
                let r = lethe_iceberg::ops::rewrite::dry_run(
                    &ws.warehouse,
                    &name,
                    &RowRewrite::delete(p),
                )
                .await?;
                r.files_rewritten
            }
            Action::Recompute => {
                let t = ws.warehouse.load(&name).await?;
                let files = ws.warehouse.current_files(&t).await?;
                files
                    .iter()
                    .map(|f| f.entry.data_file.file_path().to_string())
                    .collect()
            }
            _ => continue,
        };
        out.insert(step.table.clone(), files);
    }
    Ok(out)
}

/// [`BenchCommand::Floor`].
async fn floor_bench(config: Option<&Path>, subjects_file: &Path) -> anyhow::Result<()> {
    use futures::StreamExt;
    let ws = super::workspace(config)?;
    let by_table = files_to_rewrite(&ws, subjects_file).await?;
    let mut work = Vec::new();
    for (table, files) in &by_table {
        let t = ws.warehouse.load(&TableName::parse(table)?).await?;
        work.extend(files.iter().map(|f| (t.clone(), f.clone())));
    }
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let started = Instant::now();
    let store = ws.warehouse.store.clone();
    let results: Vec<anyhow::Result<(u64, u64, Vec<String>)>> =
        futures::stream::iter(work.into_iter().map(|(t, f)| {
            let store = store.clone();
            tokio::task::spawn_blocking(move || -> anyhow::Result<(u64, u64, Vec<String>)> {
                let schema = t.metadata.current_schema();
                let batches = lethe_iceberg::read::read_data_file(store.as_ref(), &f, schema)?;
                let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
                let written = lethe_iceberg::writer::write_batches(
                    store.as_ref(),
                    &t.metadata,
                    &batches,
                    WriteOptions::default(),
                )?;
                let bytes = written.iter().map(|d| d.file_size_in_bytes()).sum();
                Ok((
                    rows,
                    bytes,
                    written.iter().map(|d| d.file_path().to_string()).collect(),
                ))
            })
        }))
        .buffer_unordered(cores)
        .map(|r| r.map_err(anyhow::Error::from).and_then(|r| r))
        .collect()
        .await;
    let seconds = started.elapsed().as_secs_f64();
    let (mut rows, mut bytes, mut files) = (0u64, 0u64, 0usize);
    let mut first_error = None;
    for r in results {
        match r {
            Ok((n, b, written)) => {
                rows += n;
                bytes += b;
                files += 1;
                for w in written {
                    store.delete(&w)?;
                }
            }
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let tables: BTreeMap<&String, usize> = by_table.iter().map(|(t, f)| (t, f.len())).collect();
    println!(
        "{}",
        serde_json::json!({
            "seconds": seconds,
            "files": files,
            "rows": rows,
            "bytes_written": bytes,
            "files_by_table": tables,
            "threads": cores,
        })
    );
    Ok(())
}

/// [`BenchCommand::Get`].
fn get_bench(config: Option<&Path>, prefix: &str, concurrency: usize) -> anyhow::Result<()> {
    let ws = super::workspace(config)?;
    let store = ws.warehouse.store.as_ref();
    let listed = Instant::now();
    let mut objects = Vec::new();
    for f in store.list(prefix)? {
        objects.push(f?.location);
    }
    let listing_seconds = listed.elapsed().as_secs_f64();
    let threads = match concurrency {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => n,
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    let totals: Vec<anyhow::Result<u64>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| -> anyhow::Result<u64> {
                    let mut bytes = 0u64;
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(o) = objects.get(i) else {
                            return Ok(bytes);
                        };
                        bytes += store.read(o)?.len() as u64;
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a reader panicked")))
            })
            .collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut bytes = 0u64;
    for t in totals {
        bytes += t?;
    }
    println!(
        "{}",
        serde_json::json!({
            "objects": objects.len(),
            "bytes": bytes,
            "seconds": seconds,
            "listing_seconds": listing_seconds,
            "concurrency": threads,
            "mb_per_second": bytes as f64 / 1e6 / seconds,
        })
    );
    Ok(())
}
