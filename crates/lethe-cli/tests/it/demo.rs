//! Issue 2: the demo platform, the catalog PyIceberg opens, metrics truncation, recorded
//! lineage, bad input.

use std::collections::BTreeMap;

use lethe_iceberg::catalog::TableName;
use lethe_iceberg::commit::{SetProperties, commit};
use lethe_iceberg::metrics::{truncate_lower_str, truncate_upper_str};
use lethe_iceberg::ops::rewrite::{RowRewrite, rewrite_rows, select_rows};
use lethe_iceberg::predicate::Predicate;
use lethe_lineage::{RunEvent, parse_events};

use crate::common::{Demo, column_blooms, lethe_in, pyiceberg};

#[tokio::test(flavor = "multi_thread")]
async fn pyiceberg_reads_every_table_with_the_rows_lethe_reports() {
    let demo = Demo::new().await;
    let listed: serde_json::Value =
        serde_json::from_str(&demo.lethe_ok(&["tables", "--json"], 0)).unwrap();
    let lethe_rows: BTreeMap<String, u64> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["table"].as_str().unwrap().to_string(),
                t["rows"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(lethe_rows.len(), 13, "{lethe_rows:?}"); // 12 + consent.records
    assert_eq!(lethe_rows["crm.learners"], 5_000);
    assert_eq!(lethe_rows["learning.events"], 100_000);
    assert_eq!(lethe_rows["support.tickets"], 2_000);
    let py = pyiceberg(&demo.dir, "read_tables.py", &[], None);
    let py_rows: BTreeMap<String, u64> = py
        .as_object()
        .unwrap()
        .iter()
        .map(|(t, v)| (t.clone(), v["rows"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        py_rows, lethe_rows,
        "PyIceberg 0.12 and lethe disagree on row counts"
    );
}

/// Every crm.learners manifest entry keeps email bounds of at most 16 code points, the upper
/// one incremented as the spec says; with `none` and a rewrite, no email bounds at all.
#[tokio::test(flavor = "multi_thread")]
async fn email_bounds_are_truncated_then_gone_with_metrics_none() {
    let demo = Demo::new().await;
    let wh = &demo.ws.warehouse;
    let name = TableName::parse("crm.learners").unwrap();
    let table = wh.load(&name).await.unwrap();
    let email_id = table
        .metadata
        .current_schema()
        .field_by_name("email")
        .unwrap()
        .id;
    let files = wh.current_files(&table).await.unwrap();
    assert_eq!(files.len(), 3, "crm.learners is written in three appends");
    let mut checked = 0;
    for f in &files {
        let df = &f.entry.data_file;
        // The file's real min and max email.
        let batches = lethe_iceberg::read::read_data_file(
            wh.store.as_ref(),
            df.file_path(),
            table.metadata.current_schema(),
        )
        .unwrap();
        let mut emails: Vec<String> = Vec::new();
        for b in &batches {
            let c = b.column_by_name("email").unwrap();
            let s = arrow::array::AsArray::as_string::<i32>(c.as_ref());
            emails.extend(s.iter().flatten().map(str::to_string));
        }
        emails.sort();
        let (min, max) = (emails.first().unwrap(), emails.last().unwrap());
        let lower = lethe_iceberg::inspect::readable(&df.lower_bounds()[&email_id]);
        let upper = lethe_iceberg::inspect::readable(&df.upper_bounds()[&email_id]);
        assert!(
            lower.chars().count() <= 16 && upper.chars().count() <= 16,
            "{lower} / {upper}"
        );
        assert_eq!(lower, truncate_lower_str(min, 16));
        assert_eq!(Some(upper.clone()), truncate_upper_str(max, 16));
        if max.chars().count() > 16 {
            assert_ne!(
                upper,
                max.chars().take(16).collect::<String>(),
                "the upper bound's last code point is incremented"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 3);
    // The capitalised email sorts first: it is the lower bound of its file.
    let demo_learner = select_rows(
        wh,
        &table,
        &Predicate::eq("learner_id", lethe_iceberg::predicate::Value::Int(3590)),
    )
    .await
    .unwrap();
    let c = demo_learner[0].column_by_name("email").unwrap();
    let email = arrow::array::AsArray::as_string::<i32>(c.as_ref())
        .value(0)
        .to_string();
    assert_eq!(email, email.to_uppercase());
    assert!(files.iter().any(|f| lethe_iceberg::inspect::readable(
        &f.entry.data_file.lower_bounds()[&email_id]
    ) == truncate_lower_str(&email, 16)));

    // email = none, one rewrite: the live entries keep no email bounds (nor counts).
    let mut set = SetProperties::default();
    set.set
        .insert("write.metadata.metrics.column.email".into(), "none".into());
    commit(wh, &name, &mut set).await.unwrap();
    let r = rewrite_rows(wh, &name, &RowRewrite::rewrite_all())
        .await
        .unwrap();
    assert_eq!(r.files_rewritten.len(), 3);
    let table = wh.load(&name).await.unwrap();
    let phone_id = table
        .metadata
        .current_schema()
        .field_by_name("phone")
        .unwrap()
        .id;
    for f in wh.current_files(&table).await.unwrap() {
        let df = &f.entry.data_file;
        assert!(
            !df.lower_bounds().contains_key(&email_id)
                && !df.upper_bounds().contains_key(&email_id)
        );
        assert!(
            !df.value_counts().contains_key(&email_id),
            "none keeps no counts either"
        );
        assert!(
            df.lower_bounds().contains_key(&phone_id),
            "other columns keep their default bounds"
        );
    }
}

fn events(dir: &std::path::Path) -> Vec<RunEvent> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir.join("lineage")).unwrap() {
        let p = e.unwrap().path();
        out.extend(parse_events(&p.display().to_string(), &std::fs::read(&p).unwrap()).unwrap());
    }
    out
}

/// (input table, input column, TYPE, SUBTYPE) of an output field of an output dataset.
fn inputs_of(
    events: &[RunEvent],
    dataset: &str,
    field: &str,
) -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    for ev in events {
        for o in ev.outputs.iter().filter(|o| o.name == dataset) {
            let cl = o
                .facets
                .column_lineage
                .as_ref()
                .expect("lethe records column lineage");
            if let Some(f) = cl.fields.get(field) {
                for i in &f.input_fields {
                    for t in f.transformations_of(i).iter() {
                        out.push((
                            i.name.clone(),
                            i.field.clone(),
                            t.kind.as_str().to_string(),
                            t.subtype.clone().unwrap_or_default(),
                        ));
                    }
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn recorded_lineage_comes_from_the_plans() {
    let demo = Demo::new().await;
    let ev = events(&demo.dir);
    assert_eq!(ev.len(), 4, "one RunEvent per pipeline run");
    let has = |ds: &str, f: &str, t: &str, c: &str, k: &str, s: &str| {
        inputs_of(&ev, ds, f).contains(&(
            t.to_string(),
            c.to_string(),
            k.to_string(),
            s.to_string(),
        ))
    };
    assert!(has(
        "marketing.audience",
        "learner_id",
        "crm.learners",
        "learner_id",
        "DIRECT",
        "IDENTITY"
    ));
    for m in ["learners", "enrollments", "avg_rating", "reviews"] {
        let direct: Vec<_> = inputs_of(&ev, "analytics.course_performance", m)
            .into_iter()
            .filter(|x| x.2 == "DIRECT")
            .collect();
        assert!(
            !direct.is_empty() && direct.iter().all(|x| x.3 == "AGGREGATION"),
            "{m}: {direct:?}"
        );
    }
    assert!(has(
        "ai.review_corpus",
        "review_id",
        "learning.reviews",
        "review_id",
        "DIRECT",
        "IDENTITY"
    ));
    assert!(has(
        "marketing.audience",
        "learner_id",
        "crm.learners",
        "marketing_consent",
        "INDIRECT",
        "FILTER"
    ));
    assert!(has(
        "ai.review_corpus",
        "review_id",
        "crm.learners",
        "ai_training_consent",
        "INDIRECT",
        "FILTER"
    ));
    assert!(has(
        "ai.review_corpus",
        "text",
        "crm.learners",
        "learner_id",
        "INDIRECT",
        "JOIN"
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_config_and_governance_name_file_line_and_key() {
    let demo = Demo::new().await;
    let cfg = demo.dir.join("lethe.toml");
    let good = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, good.replace("name = \"lethe\"", "name = 42")).unwrap();
    let out = lethe_in(&demo.dir, &["tables"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lethe.toml:4: catalog.name:"), "{err}");
    std::fs::write(&cfg, good).unwrap();

    let ret = demo.dir.join("governance/retention.toml");
    let text = std::fs::read_to_string(&ret).unwrap();
    std::fs::write(
        &ret,
        text.replace("keep_days = 365\n", "keep_days = \"a year\"\n"),
    )
    .unwrap();
    let out = lethe_in(&demo.dir, &["retention", "due", "--day", "2026-10-01"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let line = text.lines().position(|l| l == "keep_days = 365").unwrap() + 1;
    assert!(
        err.contains(&format!(
            "retention.toml:{line}: tables.\"learning.events\".keep_days:"
        )),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_pipeline_names_itself_and_leaves_its_target_as_it_was() {
    let demo = Demo::new().await;
    let name = TableName::parse("marketing.audience").unwrap();
    let before = demo
        .ws
        .warehouse
        .load(&name)
        .await
        .unwrap()
        .metadata_location
        .clone();
    std::fs::write(
        demo.dir.join("pipelines/broken_audience.sql"),
        "-- lethe:target marketing.audience\nSELECT learner_id, no_such_column FROM crm.learners\n",
    )
    .unwrap();
    let out = demo.lethe(&["pipeline", "run", "broken_audience"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pipeline `broken_audience` failed"), "{err}");
    let after = demo
        .ws
        .warehouse
        .load(&name)
        .await
        .unwrap()
        .metadata_location
        .clone();
    assert_eq!(before, after, "the target table must not change");
    // A pipeline without a target header is a config error with file and line.
    std::fs::write(demo.dir.join("pipelines/broken_audience.sql"), "SELECT 1\n").unwrap();
    let out = demo.lethe(&["pipeline", "run", "--all"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken_audience.sql:1: lethe:target"));
}

/// Once a warehouse uses generated properties, a pipeline run gives them back to the table it
/// replaces before writing, so its new files keep no personal bounds.
#[tokio::test(flavor = "multi_thread")]
async fn a_pipeline_run_applies_the_generated_properties_to_its_target() {
    let demo = Demo::new().await;
    let wh = &demo.ws.warehouse;
    demo.lethe_ok(&["properties", "apply"], 0);
    let name = TableName::parse("marketing.audience").unwrap();
    // Someone removes the table's settings (as a drop-and-recreate would).
    let t = wh.load(&name).await.unwrap();
    let mut strip = SetProperties {
        remove: t
            .metadata
            .properties()
            .keys()
            .filter(|k| k.starts_with("write.metadata.metrics.column."))
            .cloned()
            .collect(),
        ..Default::default()
    };
    assert!(!strip.remove.is_empty());
    commit(wh, &name, &mut strip).await.unwrap();
    demo.lethe_ok(&["properties", "check"], 1);
    demo.lethe_ok(&["pipeline", "run", "marketing_audience"], 0);
    demo.lethe_ok(&["properties", "check"], 0);
    let t = wh.load(&name).await.unwrap();
    let email = t
        .metadata
        .current_schema()
        .field_by_name("email")
        .unwrap()
        .id;
    for f in wh.current_files(&t).await.unwrap() {
        assert!(
            !f.entry.data_file.lower_bounds().contains_key(&email),
            "the rebuilt files keep no email bounds"
        );
    }
}

/// `demo init --bloom-filters`: every generated table with a `learner_id` column asks for a
/// bloom filter on it, every data file of those tables has one that passes each learner the
/// file holds and rejects most it doesn't, and tables without the column ask for none.
#[tokio::test(flavor = "multi_thread")]
async fn the_bloom_filter_demo_filters_learner_ids() {
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::Int64Type;
    use parquet::arrow::ProjectionMask;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let out = lethe_in(
        tmp.path(),
        &[
            "demo",
            "init",
            "--dir",
            dir.to_str().unwrap(),
            "--warehouse-only",
            "--bloom-filters",
            "--json",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let ws = lethe::workspace::Workspace::open(
        &lethe::config::Config::load(&dir.join("lethe.toml")).unwrap(),
    )
    .unwrap();
    let wh = &ws.warehouse;
    let key = "write.parquet.bloom-filter-enabled.column.learner_id";
    let mut files = 0;
    for name in [
        "crm.learners",
        "billing.payments",
        "learning.events",
        "learning.courses",
    ] {
        let table = wh.load(&TableName::parse(name).unwrap()).await.unwrap();
        let has_column = table
            .metadata
            .current_schema()
            .field_by_name("learner_id")
            .is_some();
        assert_eq!(table.property(key), has_column.then_some("true"), "{name}");
        if !has_column {
            continue;
        }
        for f in wh.current_files(&table).await.unwrap() {
            let location = f.entry.data_file.file_path();
            let [bloom] = column_blooms(location, "learner_id")
                .try_into()
                .unwrap_or_else(|b: Vec<_>| {
                    panic!("{name}: {} learner_id filters in {location}", b.len())
                });
            let path = lethe_iceberg::store::normalize_local(location).unwrap();
            // The learners the file holds, read with parquet's own reader.
            let builder =
                ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap())
                    .unwrap();
            let mask = ProjectionMask::columns(builder.parquet_schema(), ["learner_id"]);
            let mut held = std::collections::BTreeSet::new();
            for b in builder.with_projection(mask).build().unwrap() {
                let b = b.unwrap();
                let ids: &Int64Array = b.column(0).as_primitive::<Int64Type>();
                held.extend(ids.iter().flatten());
            }
            assert!(!held.is_empty());
            assert!(
                held.iter().all(|v| bloom.check(v)),
                "{name}: a held learner fails"
            );
            let absent: Vec<i64> = (1..=20_000).filter(|v| !held.contains(v)).collect();
            let passed = absent.iter().filter(|v| bloom.check(*v)).count();
            assert!(
                passed * 20 < absent.len(),
                "{name}: {passed} of {} absent learners pass",
                absent.len()
            );
            files += 1;
        }
    }
    assert!(files >= 3, "{files}");
}
