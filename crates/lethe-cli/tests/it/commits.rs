//! Issue 3: copy-on-write row deletes, optimistic concurrency, retention by rule, expiry that
//! respects each table.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arrow::array::{Array, ArrayRef, AsArray, Date32Array, Int64Array, RecordBatch, StringArray};
use async_trait::async_trait;
use iceberg::spec::{
    FormatVersion, NestedField, PrimitiveType, Schema, SnapshotReference, SnapshotRetention, Type,
};
use iceberg::{TableRequirement, TableUpdate};
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::commit::{ActionCommit, SetProperties, TableAction, commit};
use lethe_iceberg::ops::rewrite::{RowRewrite, append, count_rows, rewrite_rows, select_rows};
use lethe_iceberg::predicate::{CmpOp, Predicate, Value};
use lethe_iceberg::table::{LoadedTable, Warehouse};
use lethe_iceberg::writer::WriteOptions;
use rand::{Rng, SeedableRng};

use crate::common::{Demo, pyiceberg, seed};

type Row = (i64, String, i64, i32);

fn rows_of(batches: &[RecordBatch]) -> Vec<Row> {
    let mut out = Vec::new();
    for b in batches {
        let id = b
            .column_by_name("id")
            .unwrap()
            .as_primitive::<arrow::datatypes::Int64Type>();
        let cat = b.column_by_name("category").unwrap().as_string::<i32>();
        let amt = b
            .column_by_name("amount")
            .unwrap()
            .as_primitive::<arrow::datatypes::Int64Type>();
        let day = b
            .column_by_name("day")
            .unwrap()
            .as_primitive::<arrow::datatypes::Date32Type>();
        for i in 0..b.num_rows() {
            out.push((
                id.value(i),
                cat.value(i).to_string(),
                amt.value(i),
                day.value(i),
            ));
        }
    }
    out.sort();
    out
}

fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_from_iter(vec![
        (
            "id",
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
        (
            "category",
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
        (
            "amount",
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
        (
            "day",
            Arc::new(Date32Array::from(
                rows.iter().map(|r| r.3).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
    ])
    .unwrap()
}

/// A table of random rows in several files: one file whose rows all match the test's
/// predicate, one with none, the rest mixed.
async fn random_table(wh: &Warehouse, name: &TableName, seed: u64) -> Vec<Row> {
    let schema = Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "category", Type::Primitive(PrimitiveType::String)).into(),
            NestedField::optional(3, "amount", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(4, "day", Type::Primitive(PrimitiveType::Date)).into(),
        ])
        .build()
        .unwrap();
    wh.create_table(name, schema, None, None, HashMap::new(), FormatVersion::V2)
        .await
        .unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut all = Vec::new();
    let mut next = 0i64;
    for file in 0..7 {
        let n = rng.random_range(20..200);
        let rows: Vec<Row> = (0..n)
            .map(|_| {
                next += 1;
                let cat = match file {
                    0 => "hot".to_string(),
                    1 => "cold".to_string(),
                    _ => ["hot", "warm", "cold"][rng.random_range(0..3)].to_string(),
                };
                let amount = if file == 0 {
                    rng.random_range(0..50)
                } else {
                    rng.random_range(0..1000)
                };
                (next, cat, amount, rng.random_range(19_000..20_000))
            })
            .collect();
        append(
            wh,
            name,
            &[batch(&rows)],
            BTreeMap::new(),
            WriteOptions::default(),
        )
        .await
        .unwrap();
        all.extend(rows);
    }
    all.sort();
    all
}

fn predicate() -> Predicate {
    Predicate::eq("category", Value::Str("hot".into())).and(Predicate::cmp(
        "amount",
        CmpOp::Lt,
        Value::Int(500),
    ))
}

fn matches(r: &Row) -> bool {
    r.1 == "hot" && r.2 < 500
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delete_rewrites_exactly_the_files_holding_matching_rows() {
    let seed = seed(20261130);
    let demo = Demo::new().await;
    let wh = &demo.ws.warehouse;
    let name = TableName::parse("test.items").unwrap();
    let before = random_table(wh, &name, seed).await;
    let table = wh.load(&name).await.unwrap();
    // Which files hold matching rows, by path, from the files themselves.
    let mut expect_rewritten = BTreeSet::new();
    let mut expect_dropped = BTreeSet::new();
    let mut removed_records = 0u64;
    for f in wh.current_files(&table).await.unwrap() {
        let path = f.entry.data_file.file_path().to_string();
        let rows = rows_of(
            &lethe_iceberg::read::read_data_file(
                wh.store.as_ref(),
                &path,
                table.metadata.current_schema(),
            )
            .unwrap(),
        );
        let m = rows.iter().filter(|r| matches(r)).count();
        if m == rows.len() {
            expect_dropped.insert(path);
            removed_records += rows.len() as u64;
        } else if m > 0 {
            expect_rewritten.insert(path);
            removed_records += rows.len() as u64;
        }
    }
    assert!(
        !expect_dropped.is_empty() && !expect_rewritten.is_empty(),
        "the fixture has both kinds of files"
    );
    let report = rewrite_rows(
        wh,
        &name,
        &RowRewrite::delete(predicate()).with_summary("erasure-request", "erasure-test"),
    )
    .await
    .unwrap();
    assert_eq!(
        report
            .files_rewritten
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>(),
        expect_rewritten
    );
    assert_eq!(
        report
            .files_dropped
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>(),
        expect_dropped
    );
    let matched = before.iter().filter(|r| matches(r)).count() as u64;
    assert_eq!(report.rows_matched, matched);

    // Every other row is identical.
    let after_table = wh.load(&name).await.unwrap();
    let after = rows_of(
        &select_rows(wh, &after_table, &Predicate::True)
            .await
            .unwrap(),
    );
    let expected: Vec<Row> = before.iter().filter(|r| !matches(r)).cloned().collect();
    assert_eq!(after, expected);

    // The summary carries the caller's key and the standard counts.
    let snap = after_table.current_snapshot().unwrap();
    let s = &snap.summary().additional_properties;
    assert_eq!(snap.summary().operation.as_str(), "overwrite");
    assert_eq!(s["erasure-request"], "erasure-test");
    assert_eq!(
        s["deleted-data-files"],
        (expect_rewritten.len() + expect_dropped.len()).to_string()
    );
    assert_eq!(s["added-data-files"], report.files_added.len().to_string());
    assert_eq!(s["deleted-records"], removed_records.to_string());
    assert_eq!(s["added-records"], (removed_records - matched).to_string());
    assert_eq!(s["total-records"], expected.len().to_string());
    let live = wh.current_files(&after_table).await.unwrap();
    assert_eq!(s["total-data-files"], live.len().to_string());
    let live_paths: BTreeSet<String> = live
        .iter()
        .map(|f| f.entry.data_file.file_path().to_string())
        .collect();
    assert!(live_paths.is_disjoint(&expect_rewritten) && live_paths.is_disjoint(&expect_dropped));

    // A delete that matches nothing commits nothing.
    let again = rewrite_rows(wh, &name, &RowRewrite::delete(predicate()))
        .await
        .unwrap();
    assert_eq!(again.snapshot_id, None);
    assert_eq!(
        wh.load(&name).await.unwrap().metadata_location,
        after_table.metadata_location
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn tombstones_null_columns_only_where_the_predicate_holds() {
    let seed = seed(7);
    let demo = Demo::new().await;
    let wh = &demo.ws.warehouse;
    let name = TableName::parse("test.tomb").unwrap();
    let before = random_table(wh, &name, seed).await;
    let r = rewrite_rows(
        wh,
        &name,
        &RowRewrite::set_null(predicate(), vec!["category".into()]),
    )
    .await
    .unwrap();
    assert_eq!(
        r.rows_matched as usize,
        before.iter().filter(|x| matches(x)).count()
    );
    let t = wh.load(&name).await.unwrap();
    let all = select_rows(wh, &t, &Predicate::True).await.unwrap();
    let rows: usize = all.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, before.len(), "tombstones keep every row");
    let nulls: usize = all
        .iter()
        .map(|b| b.column_by_name("category").unwrap().null_count())
        .sum();
    assert_eq!(nulls as u64, r.rows_matched);
    // Again: the columns are already null, nothing changes, nothing is committed.
    assert_eq!(
        rewrite_rows(
            wh,
            &name,
            &RowRewrite::set_null(predicate(), vec!["category".into()])
        )
        .await
        .unwrap()
        .snapshot_id,
        None
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn pyiceberg_reads_the_delete_and_time_travels_to_before_it() {
    let demo = Demo::new().await;
    let wh = &demo.ws.warehouse;
    let name = TableName::parse("crm.learners").unwrap();
    let before = wh
        .load(&name)
        .await
        .unwrap()
        .current_snapshot()
        .unwrap()
        .snapshot_id();
    let r = rewrite_rows(
        wh,
        &name,
        &RowRewrite::delete(Predicate::eq("learner_id", Value::Int(3590))),
    )
    .await
    .unwrap();
    assert_eq!(r.rows_matched, 1);
    let snap = format!("crm.learners@{before}");
    let py = pyiceberg(
        &demo.dir,
        "read_tables.py",
        &[
            "crm.learners",
            "crm.learners?learner_id=3590",
            &snap,
            &format!("{snap}?learner_id=3590"),
        ],
        None,
    );
    assert_eq!(py["crm.learners"]["rows"], 4999);
    assert_eq!(py["crm.learners?learner_id=3590"]["rows"], 0);
    assert_eq!(py[&snap]["rows"], 5000);
    assert_eq!(
        py[&format!("{snap}?learner_id=3590")]["rows"],
        1,
        "time travel still returns the deleted row"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_concurrent_append_is_replanned_not_committed_blindly() {
    let demo = Demo::new().await;
    let wh = &demo.ws.warehouse;
    let name = TableName::parse("learning.events").unwrap();
    let cutoff = chrono::NaiveDate::from_ymd_opt(2025, 10, 1).unwrap();
    let pred = Predicate::cmp("occurred_at", CmpOp::Lt, Value::Date(cutoff));
    // Rows a second writer appends between lethe's planning and its commit: some old (they
    // match), some new (they must survive).
    let mut lines = String::new();
    for (i, ts) in [("2024-05-01T10:00:00"), ("2025-12-01T10:00:00")]
        .iter()
        .enumerate()
        .flat_map(|(k, ts)| (0..5).map(move |j| (k * 5 + j, *ts)))
    {
        lines.push_str(&format!(
            "{{\"event_id\": {}, \"learner_id\": 1, \"course_id\": 1, \"kind\": \"view\", \"ip_address\": \"10.0.0.1\", \"user_agent\": \"t\", \"occurred_at\": \"{ts}\"}}\n",
            900_000 + i
        ));
    }
    let fired = Arc::new(AtomicBool::new(false));
    let dir = demo.dir.clone();
    let f2 = fired.clone();
    fail::cfg_callback("row-rewrite-planned/learning.events", move || {
        if !f2.swap(true, Ordering::SeqCst) {
            pyiceberg(&dir, "append_rows.py", &["learning.events"], Some(&lines));
        }
    })
    .unwrap();
    let r = rewrite_rows(wh, &name, &RowRewrite::delete(pred.clone()))
        .await
        .unwrap();
    fail::remove("row-rewrite-planned/learning.events");
    assert!(fired.load(Ordering::SeqCst), "the second writer ran");
    assert!(
        r.attempts >= 2,
        "the commit lost the race and was replanned ({} attempts)",
        r.attempts
    );
    let t = wh.load(&name).await.unwrap();
    let (left, _) = count_rows(wh, &t, &pred).await.unwrap();
    assert_eq!(
        left, 0,
        "no matching row survives, the appended ones included"
    );
    let appended = select_rows(
        wh,
        &t,
        &Predicate::is_in("event_id", (900_000..900_010).map(Value::Int).collect()),
    )
    .await
    .unwrap();
    let ids: BTreeSet<i64> = appended
        .iter()
        .flat_map(|b| {
            b.column_by_name("event_id")
                .unwrap()
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(
        ids,
        (900_005..900_010).collect(),
        "every appended non-matching row is kept"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn retention_for_a_day_is_recorded_and_a_second_run_is_a_no_op() {
    let demo = Demo::new().await;
    let first: serde_json::Value = serde_json::from_str(
        &demo.lethe_ok(&["retention", "apply", "--day", "2026-10-01", "--json"], 0),
    )
    .unwrap();
    let by: BTreeMap<&str, &serde_json::Value> = first
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["table"].as_str().unwrap(), r))
        .collect();
    assert!(by["learning.events"]["rows_deleted"].as_u64().unwrap() > 0);
    assert!(by["support.tickets"]["rows_deleted"].as_u64().unwrap() > 0);
    assert_eq!(by["billing.payments"]["rows_deleted"], 0);
    assert!(
        by["billing.payments"]["snapshot_id"].is_null(),
        "nothing to delete commits nothing"
    );
    let t = demo.ws.warehouse.load_str("learning.events").await.unwrap();
    let s = &t
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties;
    assert_eq!(s["retention-rule"], "learning.events");
    assert_eq!(s["retention-day"], "2026-10-01");
    let second: serde_json::Value = serde_json::from_str(
        &demo.lethe_ok(&["retention", "apply", "--day", "2026-10-01", "--json"], 0),
    )
    .unwrap();
    for r in second.as_array().unwrap() {
        assert_eq!(r["rows_deleted"], 0, "{r}");
        assert!(r["snapshot_id"].is_null(), "{r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn retention_bad_input_commits_nothing() {
    let demo = Demo::new().await;
    let events_before = demo
        .ws
        .warehouse
        .load_str("learning.events")
        .await
        .unwrap()
        .metadata_location;
    let out = demo.lethe(&["retention", "apply", "--day", "01/10/2026"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a day"));
    let ret = demo.dir.join("governance/retention.toml");
    let good = std::fs::read_to_string(&ret).unwrap();
    for (bad, needle) in [
        (
            good.replace(
                "[tables.\"learning.events\"]",
                "[tables.\"learning.clicks\"]",
            ),
            "table `learning.clicks`, which is not in the catalog",
        ),
        (
            good.replace(
                "counted_from = \"occurred_at\"",
                "counted_from = \"occured_at\"",
            ),
            "has no column `occured_at`",
        ),
        (
            good.replace("counted_from = \"occurred_at\"", "counted_from = \"kind\""),
            "not a date or timestamp",
        ),
    ] {
        std::fs::write(&ret, &bad).unwrap();
        let out = demo.lethe(&["retention", "apply", "--day", "2026-10-01"]);
        assert_eq!(out.status.code(), Some(2), "{needle}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(needle) && err.contains("retention.toml:"),
            "{err}"
        );
    }
    // Issue 44 (item 5): a count past its range names file, line and key (it panicked).
    let huge = good.replacen("keep_days = ", "keep_days = 4000000000 # ", 1);
    std::fs::write(&ret, &huge).unwrap();
    let out = demo.lethe(&["retention", "apply", "--day", "2026-10-01"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let line = huge
        .lines()
        .position(|l| l.starts_with("keep_days = 4000000000"))
        .unwrap()
        + 1;
    assert!(
        err.contains(&format!("retention.toml:{line}: tables."))
            && err.contains(".keep_days: 4000000000 is out of range"),
        "{err}"
    );
    std::fs::write(&ret, good).unwrap();
    // Issue 44 (item 14): a day after today deletes nothing; a report looks ahead only when
    // told to.
    let tomorrow = (chrono::Utc::now().date_naive() + chrono::Days::new(1)).to_string();
    for args in [
        vec!["retention", "apply", "--day", &tomorrow],
        vec!["retention", "apply", "--day", "2099-01-01", "--dry-run"],
        vec!["retention", "due", "--day", "2099-01-01"],
    ] {
        let out = demo.lethe(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is after today"), "{err}");
    }
    for args in [
        vec![
            "retention",
            "apply",
            "--day",
            "2099-01-01",
            "--dry-run",
            "--look-ahead",
        ],
        vec!["retention", "due", "--day", "2099-01-01", "--look-ahead"],
    ] {
        demo.lethe_ok(&args, 0);
    }
    let after = demo
        .ws
        .warehouse
        .load_str("learning.events")
        .await
        .unwrap()
        .metadata_location;
    assert_eq!(events_before, after, "nothing was committed");
}

struct Tag(&'static str, i64);

#[async_trait]
impl TableAction for Tag {
    async fn plan(
        &mut self,
        _wh: &Warehouse,
        t: &LoadedTable,
    ) -> lethe_iceberg::Result<Option<ActionCommit>> {
        Ok(Some(ActionCommit {
            updates: vec![TableUpdate::SetSnapshotRef {
                ref_name: self.0.into(),
                reference: SnapshotReference::new(
                    self.1,
                    SnapshotRetention::Tag {
                        max_ref_age_ms: None,
                    },
                ),
            }],
            requirements: vec![TableRequirement::UuidMatch {
                uuid: t.metadata.uuid(),
            }],
            ..Default::default()
        }))
    }
}

async fn set(wh: &Warehouse, table: &str, k: &str, v: &str) {
    let mut a = SetProperties::default();
    a.set.insert(k.into(), v.into());
    commit(wh, &TableName::parse(table).unwrap(), &mut a)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn expiry_honours_gc_enabled_min_snapshots_and_tags() {
    let demo = Demo::new().await;
    let wh = &demo.ws.warehouse;
    let future = "2099-01-01T00:00:00Z";
    // gc.enabled=false: refused, the table named with the reason.
    set(wh, "crm.learners", "gc.enabled", "false").await;
    let out = demo.lethe(&["expire", "crm.learners", "--older-than", future]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("crm.learners has gc.enabled=false"), "{text}");
    assert_eq!(
        wh.load_str("crm.learners")
            .await
            .unwrap()
            .metadata
            .snapshots()
            .len(),
        3
    );

    // min-snapshots-to-keep=3 keeps 3 of the payments' snapshots.
    set(
        wh,
        "billing.payments",
        "history.expire.min-snapshots-to-keep",
        "3",
    )
    .await;
    rewrite_rows(
        wh,
        &TableName::parse("billing.payments").unwrap(),
        &RowRewrite::delete(Predicate::eq("learner_id", Value::Int(1))),
    )
    .await
    .unwrap();
    assert_eq!(
        wh.load_str("billing.payments")
            .await
            .unwrap()
            .metadata
            .snapshots()
            .len(),
        4
    );
    demo.lethe_ok(&["expire", "billing.payments", "--older-than", future], 0);
    assert_eq!(
        wh.load_str("billing.payments")
            .await
            .unwrap()
            .metadata
            .snapshots()
            .len(),
        3
    );

    // A tagged snapshot survives; everything else but the current one goes.
    let name = TableName::parse("learning.reviews").unwrap();
    let t = wh.load(&name).await.unwrap();
    let mut ids: Vec<(i64, i64)> = t
        .metadata
        .snapshots()
        .map(|s| (s.timestamp_ms(), s.snapshot_id()))
        .collect();
    ids.sort();
    let oldest = ids[0].1;
    commit(wh, &name, &mut Tag("audit-2025", oldest))
        .await
        .unwrap();
    rewrite_rows(
        wh,
        &name,
        &RowRewrite::delete(Predicate::eq("learner_id", Value::Int(1))),
    )
    .await
    .unwrap();
    let out: serde_json::Value = serde_json::from_str(&demo.lethe_ok(
        &[
            "expire",
            "learning.reviews",
            "--older-than",
            future,
            "--json",
        ],
        0,
    ))
    .unwrap();
    let t = wh.load(&name).await.unwrap();
    let left: BTreeSet<i64> = t.metadata.snapshots().map(|s| s.snapshot_id()).collect();
    assert_eq!(
        left,
        [oldest, t.current_snapshot().unwrap().snapshot_id()]
            .into_iter()
            .collect()
    );
    let kept = out["expired"][0]["kept"].as_array().unwrap();
    assert!(
        kept.iter().any(|k| k["snapshot_id"] == oldest
            && k["reason"]
                .as_str()
                .unwrap()
                .contains("tagged `audit-2025`")),
        "{kept:?}"
    );
    // The tagged snapshot's files are still readable.
    let tagged = pyiceberg(
        &demo.dir,
        "read_tables.py",
        &[&format!("learning.reviews@{oldest}")],
        None,
    );
    assert!(
        tagged[&format!("learning.reviews@{oldest}")]["rows"]
            .as_u64()
            .unwrap()
            > 0
    );
}

/// A commit whose acknowledgement is lost: lethe reloads, finds its own metadata current, and
/// counts the commit as landed; it deletes none of the files it wrote.
#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_commit_outcome_is_reconciled_by_reloading() {
    let demo = Demo::new().await;
    let wh = &demo.ws.warehouse;
    let name = TableName::parse("learning.reviews").unwrap();
    fail::cfg("catalog-swap-unknown-after/learning.reviews", "1*return").unwrap();
    let r = rewrite_rows(
        wh,
        &name,
        &RowRewrite::delete(Predicate::eq("learner_id", Value::Int(3590))),
    )
    .await;
    fail::remove("catalog-swap-unknown-after/learning.reviews");
    let r = r.unwrap();
    assert_eq!(
        r.attempts, 1,
        "the reload showed the commit landed: no retry"
    );
    let t = wh.load(&name).await.unwrap();
    assert_eq!(
        t.current_snapshot().unwrap().snapshot_id(),
        r.snapshot_id.unwrap()
    );
    for f in wh.current_files(&t).await.unwrap() {
        assert!(
            wh.store.exists(f.entry.data_file.file_path()).unwrap(),
            "a file the commit wrote was deleted"
        );
    }
    assert_eq!(
        count_rows(wh, &t, &Predicate::eq("learner_id", Value::Int(3590)))
            .await
            .unwrap()
            .0,
        0
    );
}

fn metadata_files(wh: &Warehouse, t: &LoadedTable) -> usize {
    let dir = wh.store.local_path(t.location()).unwrap().join("metadata");
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".metadata.json")
        })
        .count()
}

/// The demo's events table is sorted by learner_id: a learner's delete rewrites only the files
/// holding their rows, each into a file of its own in the table's sort order, recorded by
/// sort_order_id. The cleanup's manifest rewrite, expiry and trimmed log are one commit (one
/// metadata file), run again it commits nothing, and PyIceberg reads the result.
#[tokio::test(flavor = "multi_thread")]
async fn a_sorted_table_keeps_its_order_and_its_history_is_purged_in_one_commit() {
    use iceberg::spec::{ManifestStatus, Operation};
    use lethe_iceberg::ops::expire::Cutoff;
    use lethe_iceberg::ops::history::purge_history;
    let demo = Demo::new().await;
    let wh = &demo.ws.warehouse;
    let name = TableName::parse("learning.events").unwrap();
    let t0 = wh.load(&name).await.unwrap();
    let order = t0.metadata.default_sort_order().clone();
    assert_eq!(
        order.fields.len(),
        2,
        "the demo declares learner_id, occurred_at"
    );
    let learner_field = t0
        .metadata
        .current_schema()
        .field_by_name("learner_id")
        .unwrap()
        .id;
    assert_eq!(order.fields[0].source_id, learner_field);
    let schema = t0.metadata.current_schema().clone();
    let mut holding = BTreeSet::new();
    for f in wh.current_files(&t0).await.unwrap() {
        let path = f.entry.data_file.file_path().to_string();
        let batches =
            lethe_iceberg::read::read_data_file(wh.store.as_ref(), &path, &schema).unwrap();
        if batches.iter().any(|b| {
            let l = b
                .column_by_name("learner_id")
                .unwrap()
                .as_primitive::<arrow::datatypes::Int64Type>();
            l.values().contains(&3590)
        }) {
            holding.insert(path);
        }
    }
    let r = rewrite_rows(
        wh,
        &name,
        &RowRewrite::delete(Predicate::eq("learner_id", Value::Int(3590))),
    )
    .await
    .unwrap();
    assert_eq!(r.rows_matched, 19);
    let changed: BTreeSet<String> = r
        .files_rewritten
        .iter()
        .chain(&r.files_dropped)
        .cloned()
        .collect();
    assert_eq!(
        changed, holding,
        "exactly the files holding the learner's rows change"
    );
    assert!(
        changed.len() < r.files_in_table && r.rows_rewritten * 10 < r.rows_in_table * 6,
        "one compacted file of the learner's range and the daily files holding their events: {} of {} files, {} of {} rows",
        changed.len(),
        r.files_in_table,
        r.rows_rewritten,
        r.rows_in_table
    );
    assert_eq!(
        r.files_added.len(),
        r.files_rewritten.len(),
        "one file for each"
    );
    let t1 = wh.load(&name).await.unwrap();
    for f in wh.current_files(&t1).await.unwrap() {
        let path = f.entry.data_file.file_path().to_string();
        if !r.files_added.contains(&path) {
            continue;
        }
        assert_eq!(
            f.entry.data_file.sort_order_id(),
            Some(order.order_id as i32),
            "a rewritten file records the table's sort order"
        );
        let batches =
            lethe_iceberg::read::read_data_file(wh.store.as_ref(), &path, &schema).unwrap();
        let mut keys: Vec<(i64, i64)> = Vec::new();
        for b in &batches {
            let l = b
                .column_by_name("learner_id")
                .unwrap()
                .as_primitive::<arrow::datatypes::Int64Type>();
            let o = b
                .column_by_name("occurred_at")
                .unwrap()
                .as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
            keys.extend((0..b.num_rows()).map(|i| (l.value(i), o.value(i))));
        }
        assert!(!keys.is_empty());
        assert!(
            keys.windows(2).all(|w| w[0] <= w[1]),
            "{path} is in the sort order"
        );
        assert!(!keys.iter().any(|k| k.0 == 3590));
    }
    // The cleanup's history: one commit, one metadata file.
    let snapshots_before = t1.metadata.snapshots().count();
    assert!(snapshots_before > 2);
    let files_before = metadata_files(wh, &t1);
    let h = purge_history(
        wh,
        &name,
        Cutoff::OlderThan(chrono::Utc::now() + chrono::Duration::seconds(1)),
        [("erasure-request".to_string(), "r-1".to_string())].into(),
        &lethe_iceberg::clock::SystemClock,
    )
    .await
    .unwrap();
    assert!(h.expire.committed);
    assert_eq!(
        metadata_files(wh, &t1),
        files_before + 1,
        "the rewrite, the expiry and the trimmed log are one metadata file"
    );
    let t2 = wh.load(&name).await.unwrap();
    let current = t2.current_snapshot().unwrap();
    assert_eq!(Some(current.snapshot_id()), h.manifests.snapshot_id);
    assert_eq!(current.summary().operation, Operation::Replace);
    assert_eq!(
        current.summary().additional_properties["erasure-request"],
        "r-1"
    );
    assert_eq!(
        t2.metadata.snapshots().count(),
        1,
        "every older snapshot expired"
    );
    assert_eq!(h.expire.expired.len(), snapshots_before);
    assert!(t2.metadata.metadata_log().is_empty(), "the log is trimmed");
    for mf in wh.manifest_list(&t2, current).unwrap().entries() {
        for e in wh.manifest_entries(mf).await.unwrap() {
            assert_ne!(
                e.status,
                ManifestStatus::Deleted,
                "no DELETED entry is left"
            );
        }
    }
    assert!(
        h.expire.files_deleted > 0,
        "the files only expired snapshots reached"
    );
    for f in &r.files_rewritten {
        assert!(!wh.store.local_path(f).unwrap().exists(), "{f} is deleted");
    }
    // Again: nothing to do, nothing committed.
    let again = purge_history(
        wh,
        &name,
        Cutoff::OlderThan(chrono::Utc::now() + chrono::Duration::seconds(1)),
        BTreeMap::new(),
        &lethe_iceberg::clock::SystemClock,
    )
    .await
    .unwrap();
    assert!(!again.expire.committed);
    assert_eq!(metadata_files(wh, &t1), files_before + 1);
    let (rows, _) = count_rows(wh, &t2, &Predicate::True).await.unwrap();
    let py = pyiceberg(
        &demo.dir,
        "read_tables.py",
        &["learning.events", "learning.events?learner_id=3590"],
        None,
    );
    assert_eq!(py["learning.events"]["rows"], rows);
    assert_eq!(py["learning.events?learner_id=3590"]["rows"], 0);
}

/// Every file under a table's location (data and metadata).
fn table_files(wh: &Warehouse, t: &LoadedTable) -> BTreeSet<String> {
    fn walk(dir: &std::path::Path, out: &mut BTreeSet<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.insert(p.to_string_lossy().into_owned());
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&wh.store.local_path(t.location()).unwrap(), &mut out);
    out
}

/// A row change that carries the purge of its table's history (`with_history_purge`, what an
/// erasure's last step on a table does) reaches the state of the change followed by
/// `purge_history` in one commit: one metadata file, one snapshot (the change's own, with
/// its summary), no DELETED entry, an empty metadata log, every older snapshot expired and
/// the files only they reached deleted (the files that held the learner's rows among them).
/// A table with gc.enabled=false is refused before anything is written; a change that finds
/// nothing to change purges the history on its own; PyIceberg reads the result.
#[tokio::test(flavor = "multi_thread")]
async fn a_row_change_purges_its_tables_history_in_its_own_commit() {
    use iceberg::spec::ManifestStatus;
    use lethe_iceberg::ops::expire::Cutoff;
    use lethe_iceberg::ops::history::PurgeHistory;
    let demo = Demo::new().await;
    let wh = &demo.ws.warehouse;
    let purge = || PurgeHistory {
        cutoff: Cutoff::OlderThan(chrono::Utc::now() + chrono::Duration::seconds(1)),
        clock: Arc::new(lethe_iceberg::clock::SystemClock),
    };
    let learner = || {
        RowRewrite::delete(Predicate::eq("learner_id", Value::Int(3590)))
            .with_summary("erasure-request", "r-9")
            .with_history_purge(purge())
    };

    // gc.enabled=false: refused before a file is written.
    let learners = TableName::parse("crm.learners").unwrap();
    set(wh, "crm.learners", "gc.enabled", "false").await;
    let tl = wh.load(&learners).await.unwrap();
    let files = table_files(wh, &tl);
    let err = rewrite_rows(wh, &learners, &learner()).await.unwrap_err();
    assert!(err.to_string().contains("gc.enabled=false"), "{err}");
    assert_eq!(table_files(wh, &tl), files, "nothing written");
    assert_eq!(
        wh.load(&learners).await.unwrap().metadata_location,
        tl.metadata_location
    );

    let name = TableName::parse("learning.events").unwrap();
    let t0 = wh.load(&name).await.unwrap();
    let snapshots_before = t0.metadata.snapshots().count();
    assert!(snapshots_before > 1);
    let (_, rows_before) = count_rows(wh, &t0, &Predicate::True).await.unwrap();
    let metadata_before = metadata_files(wh, &t0);
    let r = rewrite_rows(wh, &name, &learner()).await.unwrap();
    assert_eq!(r.rows_matched, 19);
    assert!(!r.files_rewritten.is_empty());
    let h = r.history.as_ref().expect("the history was purged");
    assert!(h.expire.committed);
    assert_eq!(h.manifests.snapshot_id, r.snapshot_id);
    assert_eq!(
        metadata_files(wh, &t0),
        metadata_before + 1,
        "the change, the expiry and the trimmed log are one metadata file"
    );
    let t1 = wh.load(&name).await.unwrap();
    let current = t1.current_snapshot().unwrap();
    assert_eq!(Some(current.snapshot_id()), r.snapshot_id);
    assert_eq!(
        current.summary().additional_properties["erasure-request"],
        "r-9"
    );
    assert_eq!(
        current.summary().additional_properties["deleted-data-files"],
        (r.files_rewritten.len() + r.files_dropped.len()).to_string(),
        "the summary counts the removed files although no DELETED entry names them"
    );
    assert_eq!(
        t1.metadata.snapshots().count(),
        1,
        "every older snapshot expired"
    );
    assert_eq!(h.expire.expired.len(), snapshots_before);
    assert!(t1.metadata.metadata_log().is_empty(), "the log is trimmed");
    for mf in wh.manifest_list(&t1, current).unwrap().entries() {
        for e in wh.manifest_entries(mf).await.unwrap() {
            assert_ne!(e.status, ManifestStatus::Deleted, "no DELETED entry");
        }
    }
    assert!(h.expire.files_deleted > 0);
    for f in &r.files_rewritten {
        assert!(!wh.store.local_path(f).unwrap().exists(), "{f} is deleted");
    }
    let (left, total) = count_rows(wh, &t1, &Predicate::eq("learner_id", Value::Int(3590)))
        .await
        .unwrap();
    assert_eq!((left, total), (0, rows_before - 19));

    // Run again: nothing to change, nothing to purge, nothing committed.
    let again = rewrite_rows(wh, &name, &learner()).await.unwrap();
    assert_eq!(again.rows_matched, 0);
    assert_eq!(again.snapshot_id, None);
    assert!(!again.history.as_ref().unwrap().expire.committed);
    assert_eq!(metadata_files(wh, &t0), metadata_before + 1);

    // A change that matches nothing in a table with history: the history is purged anyway.
    let reviews = TableName::parse("learning.reviews").unwrap();
    let tr = wh.load(&reviews).await.unwrap();
    let n = tr.metadata.snapshots().count();
    assert!(n > 1);
    let none = rewrite_rows(
        wh,
        &reviews,
        &RowRewrite::delete(Predicate::eq("learner_id", Value::Int(-1)))
            .with_history_purge(purge()),
    )
    .await
    .unwrap();
    assert_eq!(none.rows_matched, 0);
    let hn = none.history.unwrap();
    assert!(hn.expire.committed);
    assert_eq!(
        hn.expire.expired.len(),
        n - 1 + usize::from(hn.manifests.snapshot_id.is_some())
    );
    assert_eq!(
        wh.load(&reviews)
            .await
            .unwrap()
            .metadata
            .snapshots()
            .count(),
        1
    );

    let py = pyiceberg(
        &demo.dir,
        "read_tables.py",
        &["learning.events", "learning.events?learner_id=3590"],
        None,
    );
    assert_eq!(py["learning.events"]["rows"], rows_before - 19);
    assert_eq!(py["learning.events?learner_id=3590"]["rows"], 0);
}
