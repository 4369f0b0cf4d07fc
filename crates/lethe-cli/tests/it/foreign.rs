//! Issue 8: tables other engines wrote — delete files, partitions, format versions, evolved
//! schemas. Each fixture is read by PyIceberg 0.12 before lethe touches it; after the erasure
//! PyIceberg reads exactly the expected rows, the proof scan finds no file holding the
//! subject, and no delete file names a removed data file.

use std::collections::HashMap;

use arrow::array::{AsArray, RecordBatch};
use chrono::Duration;
use iceberg::spec::{
    DataContentType, Datum, FormatVersion, PrimitiveType, Schema, Transform, Type,
};
use lethe::erasure::case::{RequestSpec, read_case};
use lethe::erasure::erase::{erase, prepare};
use lethe::erasure::prove::{ProveReport, prove};
use lethe_demo::fixtures::{delete_by_equality, delete_by_position, renamed, set_schema, upsert};
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::rewrite::{RowRewrite, count_rows, dry_run, rewrite_rows};
use lethe_iceberg::predicate::{CmpOp, Predicate, Value};

use crate::common::{column_blooms, erase_opts};
use crate::fixtures::*;

fn request() -> RequestSpec {
    RequestSpec {
        request: "erasure-0001".into(),
        subject: "customer".into(),
        id: SUBJECT.to_string(),
    }
}

fn name(s: &str) -> TableName {
    TableName::parse(s).unwrap()
}

fn ids(v: &[i64]) -> Predicate {
    Predicate::is_in("order_id", v.iter().map(|i| Value::Int(*i)).collect())
}

fn rows(v: &serde_json::Value) -> i64 {
    v["rows"]
        .as_i64()
        .unwrap_or_else(|| panic!("no row count in {v}"))
}

/// The proof scan with the traces the erasure noted before deleting anything.
async fn proof(f: &Foreign) -> ProveReport {
    let case = read_case(&f.ws, "erasure-0001").unwrap();
    prove(&f.ws, &[case], &|_| {}).await.unwrap()
}

/// The proof scan before any erasure (traces from a plan), to show it would see the subject.
async fn proof_before(f: &Foreign) -> ProveReport {
    let gov = f.ws.governance().unwrap();
    let p = prepare(&f.ws, &gov, &[request()], None, &|_| {})
        .await
        .unwrap();
    prove(&f.ws, &p.cases, &|_| {}).await.unwrap()
}

/// Erases the subject; then the proof scan is clean, PyIceberg finds none of the subject's
/// rows, and no position delete names a removed data file.
async fn erase_and_check(f: &Foreign, tables: &[&str]) {
    let before = proof_before(f).await;
    assert!(
        before.files_holding > 0,
        "the proof scan must see the subject before the erasure"
    );
    let r = erase(&f.ws, &[request()], &erase_opts(), &|_| {})
        .await
        .unwrap();
    assert!(r.journal.finished_at.is_some());
    let p = proof(f).await;
    assert!(
        p.is_clean(),
        "files still hold the subject: {:#?}\nunreadable: {:?}",
        p.hits,
        p.unreadable
    );
    for t in tables {
        let mor = f.py_mor(&format!("{t}?customer_id={SUBJECT}"));
        assert_eq!(mor["matching"], 0, "{t}: {mor}");
        assert_eq!(mor["dangling_position_deletes"], 0, "{t}: {mor}");
    }
}

/// Trino-style position deletes (one storing the deleted rows, the subject's among them).
#[tokio::test(flavor = "multi_thread")]
async fn position_deletes_are_applied_and_cleaned_up() {
    let f = Foreign::new(FormatVersion::V2, "").await;
    f.create("shop.orders", orders_schema(), None, FormatVersion::V2)
        .await;
    // A: orders 1-20 (the subject's 6), B: 21-40 (the subject's 26), C: 61-80 without the
    // subject's 66.
    f.append("shop.orders", &orders(1..=20)).await;
    f.append("shop.orders", &orders(21..=40)).await;
    f.append(
        "shop.orders",
        &orders((61..=80).filter(|o| customer_of(*o) != SUBJECT)),
    )
    .await;
    let t = name("shop.orders");
    // PD1 stores the deleted rows: the subject's order 6 with the subject's email.
    delete_by_position(f.wh(), &t, &ids(&[6, 10, 62]), true)
        .await
        .unwrap();
    // PD2 names only file C.
    delete_by_position(f.wh(), &t, &ids(&[70]), false)
        .await
        .unwrap();

    // The fixture is a valid merge-on-read table: PyIceberg applies the deletes itself.
    let py = f.py_scan("shop.orders", None);
    assert_eq!(rows(&py), 55, "{py}");
    // PD1 applies to A and C, PD2 to C (PyIceberg may also attach PD1 to B when B's path
    // sorts between A's and C's: it prunes by the delete file's path bounds).
    assert!(py["delete_files"].as_i64().unwrap() >= 3, "{py}");
    assert_eq!(rows(&f.py_mor("shop.orders")), 55);
    let loaded = f.wh().load(&t).await.unwrap();
    let (subject_rows, total) = count_rows(
        f.wh(),
        &loaded,
        &Predicate::eq("customer_id", Value::Int(SUBJECT)),
    )
    .await
    .unwrap();
    assert_eq!(
        (subject_rows, total),
        (1, 55),
        "order 6 is hidden, 26 is live"
    );
    let dry = dry_run(
        f.wh(),
        &t,
        &RowRewrite::delete(Predicate::eq("customer_id", Value::Int(SUBJECT))),
    )
    .await
    .unwrap();
    assert_eq!(dry.rows_matched, 1);
    assert_eq!(dry.rows_purged, 1, "the hidden order 6 is purged too");
    assert_eq!(dry.files_rewritten.len() + dry.files_dropped.len(), 2);
    assert_eq!(dry.delete_files_rewritten.len(), 1, "{dry:?}");

    erase_and_check(&f, &["shop.orders", "crm.customers"]).await;
    let py = f.py_scan("shop.orders", None);
    assert_eq!(rows(&py), 54, "{py}");
    let mor = f.py_mor("shop.orders");
    assert_eq!(rows(&mor), 54);
    assert_eq!(
        mor["position_delete_files"], 2,
        "PD1 rewritten for C, PD2 kept: {mor}"
    );
    assert_eq!(rows(&f.py_scan("crm.customers", None)), CUSTOMERS - 1);
    // The orders the deletes hid stay deleted.
    for o in [10, 62, 70] {
        let r = f.py_scan("shop.orders", Some(&format!("order_id = {o}")));
        assert_eq!(rows(&r), 0, "order {o}: {r}");
    }
}

/// Flink-style upserts: equality deletes holding the subject's key.
#[tokio::test(flavor = "multi_thread")]
async fn equality_deletes_holding_the_subjects_key_are_rewritten() {
    let f = Foreign::new(FormatVersion::V2, "").await;
    let schema = Schema::builder()
        .with_fields(vec![
            iceberg::spec::NestedField::required(
                1,
                "customer_id",
                Type::Primitive(PrimitiveType::Long),
            )
            .into(),
            iceberg::spec::NestedField::optional(
                2,
                "email",
                Type::Primitive(PrimitiveType::String),
            )
            .into(),
            iceberg::spec::NestedField::optional(3, "tier", Type::Primitive(PrimitiveType::String))
                .into(),
        ])
        .with_identifier_field_ids(vec![1])
        .build()
        .unwrap();
    f.create("shop.profiles", schema, None, FormatVersion::V2)
        .await;
    let profiles = |ids: &[i64], tier: &str| -> RecordBatch {
        let c = customers(ids.iter().copied());
        let tiers = arrow::array::StringArray::from(vec![Some(tier); ids.len()]);
        RecordBatch::try_new(
            std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
                c.schema().field(0).clone(),
                c.schema().field(1).clone(),
                arrow::datatypes::Field::new("tier", arrow::datatypes::DataType::Utf8, true),
            ])),
            vec![
                c.column(0).clone(),
                c.column(1).clone(),
                std::sync::Arc::new(tiers),
            ],
        )
        .unwrap()
    };
    let keys = |ids: &[i64]| profiles(ids, "x").project(&[0]).unwrap();
    let t = name("shop.profiles");
    f.append(
        "shop.profiles",
        &profiles(&(1..=20).collect::<Vec<_>>(), "basic"),
    )
    .await; // seq 1
    f.append(
        "shop.profiles",
        &profiles(&(21..=25).collect::<Vec<_>>(), "basic"),
    )
    .await; // seq 2
    // Customers 3 and 7 upgrade: delete their keys, add new rows (seq 3).
    upsert(
        f.wh(),
        &t,
        &["customer_id"],
        &keys(&[3, SUBJECT]),
        Some(&profiles(&[3, SUBJECT], "gold")),
    )
    .await
    .unwrap();
    delete_by_equality(f.wh(), &t, &["customer_id"], &keys(&[12, 22]))
        .await
        .unwrap(); // seq 4

    // Valid for PyIceberg's metadata reader; rows by the spec's rules (PyIceberg's own scan
    // refuses equality deletes).
    let mor = f.py_mor(&format!("shop.profiles?customer_id={SUBJECT}"));
    assert_eq!(rows(&mor), 25 - 2 + 2 - 2, "{mor}");
    assert_eq!(mor["matching"], 1, "the subject's gold row: {mor}");
    assert_eq!(mor["equality_delete_files"], 2);
    assert_eq!(mor["sequence_numbers"], serde_json::json!([3, 4]));
    let loaded = f.wh().load(&t).await.unwrap();
    let (m, total) = count_rows(
        f.wh(),
        &loaded,
        &Predicate::eq("customer_id", Value::Int(SUBJECT)),
    )
    .await
    .unwrap();
    assert_eq!((m, total), (1, 23));

    erase_and_check(&f, &["shop.profiles", "crm.customers"]).await;
    let mor = f.py_mor("shop.profiles?customer_id=3");
    assert_eq!(rows(&mor), 22, "{mor}");
    assert_eq!(mor["matching"], 1, "customer 3's gold row survives: {mor}");
    // The {3, 7} delete still applies to the untouched file of customers 21-25, so it is
    // rewritten without key 7 and keeps sequence number 3; {12, 22} is kept as it was.
    assert_eq!(mor["equality_delete_files"], 2, "{mor}");
    assert_eq!(mor["sequence_numbers"], serde_json::json!([3, 4]), "{mor}");
    let loaded = f.wh().load(&t).await.unwrap();
    let mut keys_left = Vec::new();
    for file in f.wh().current_files(&loaded).await.unwrap() {
        if file.entry.data_file.content_type() == DataContentType::EqualityDeletes {
            let (_, batches) = lethe_iceberg::read::read_raw(
                f.wh().store.as_ref(),
                file.entry.data_file.file_path(),
            )
            .unwrap();
            for b in batches {
                keys_left.extend(
                    b.column(0)
                        .as_primitive::<arrow::datatypes::Int64Type>()
                        .values()
                        .iter()
                        .copied(),
                );
            }
        }
    }
    keys_left.sort();
    assert_eq!(keys_left, vec![3, 12, 22]);
}

fn month_retention() -> &'static str {
    "[tables.\"shop.events\"]\nkeep_days = 91\ncounted_from = \"occurred_at\"\n"
}

async fn events_fixture() -> Foreign {
    let f = Foreign::new(FormatVersion::V2, month_retention()).await;
    f.create(
        "shop.events",
        events_schema(),
        Some(spec(4, "occurred_at_month", Transform::Month)),
        FormatVersion::V2,
    )
    .await;
    f.append("shop.events", &events(1..=60)).await;
    f.append("shop.events", &events(61..=120)).await;
    f
}

/// The manifests' partition summaries bound exactly the partition values of their files.
async fn check_partition_summaries(f: &Foreign, table: &str) {
    let t = f.wh().load_str(table).await.unwrap();
    let spec = t.metadata.default_partition_spec();
    let ptype = spec.partition_type(t.metadata.current_schema()).unwrap();
    let snapshot = t.current_snapshot().unwrap();
    for mf in f.wh().manifest_list(&t, snapshot).unwrap().entries() {
        let entries = f.wh().manifest_entries(mf).await.unwrap();
        let summaries = mf.partitions.clone().unwrap_or_default();
        assert_eq!(
            summaries.len(),
            ptype.fields().len(),
            "{}",
            mf.manifest_path
        );
        for (i, (s, field)) in summaries.iter().zip(ptype.fields()).enumerate() {
            let Type::Primitive(p) = field.field_type.as_ref() else {
                panic!()
            };
            let values: Vec<_> = entries
                .iter()
                .filter_map(|e| e.data_file.partition().fields()[i].clone())
                .map(|l| match l {
                    iceberg::spec::Literal::Primitive(p) => p,
                    other => panic!("{other:?}"),
                })
                .collect();
            let lo = values
                .iter()
                .min_by(|a, b| a.partial_cmp(b).unwrap())
                .unwrap();
            let hi = values
                .iter()
                .max_by(|a, b| a.partial_cmp(b).unwrap())
                .unwrap();
            let decode = |b: Option<&[u8]>| {
                Datum::try_from_bytes(b.unwrap(), p.clone())
                    .unwrap()
                    .literal()
                    .clone()
            };
            let lower = s.lower_bound.as_ref().map(|b| b.as_ref());
            let upper = s.upper_bound.as_ref().map(|b| b.as_ref());
            assert_eq!(&decode(lower), lo, "{table} {}: lower", field.name);
            assert_eq!(&decode(upper), hi, "{table} {}: upper", field.name);
        }
    }
}

/// A month-partitioned events table: partition pruning agrees with PyIceberg's, summaries are
/// right, and the subject's events in three months go.
#[tokio::test(flavor = "multi_thread")]
async fn month_partitioned_events_are_pruned_and_erased() {
    let f = events_fixture().await;
    let py = f.py_scan("shop.events", None);
    assert_eq!(rows(&py), 120);
    assert_eq!(py["files"], 12, "six months, two appends: {py}");
    check_partition_summaries(&f, "shop.events").await;
    let march = Predicate::cmp(
        "occurred_at",
        CmpOp::GtEq,
        Value::Date(chrono::NaiveDate::from_ymd_opt(2026, 3, 1).unwrap()),
    )
    .and(Predicate::cmp(
        "occurred_at",
        CmpOp::Lt,
        Value::Date(chrono::NaiveDate::from_ymd_opt(2026, 4, 1).unwrap()),
    ));
    let dry = dry_run(f.wh(), &name("shop.events"), &RowRewrite::delete(march))
        .await
        .unwrap();
    let py = f.py_scan(
        "shop.events",
        Some("occurred_at >= '2026-03-01T00:00:00' and occurred_at < '2026-04-01T00:00:00'"),
    );
    assert_eq!(dry.files_read, 2, "only March's files are read: {dry:?}");
    assert_eq!(py["files"], 2, "{py}");
    assert_eq!(dry.rows_matched as i64, rows(&py));
    assert_eq!(
        dry.files_dropped.len(),
        2,
        "every March row matches: the files are dropped"
    );

    erase_and_check(&f, &["shop.events", "crm.customers"]).await;
    assert_eq!(rows(&f.py_scan("shop.events", None)), 114);
    check_partition_summaries(&f, "shop.events").await;
}

/// Retention on the month-partitioned table drops whole months without rewriting a file.
#[tokio::test(flavor = "multi_thread")]
async fn retention_drops_whole_month_partitions() {
    let f = events_fixture().await;
    let gov = f.ws.governance().unwrap();
    let day = chrono::NaiveDate::from_ymd_opt(2026, 7, 1).unwrap();
    let applied = lethe::lifecycle::retention::apply(f.wh(), &gov.retention, day, false)
        .await
        .unwrap();
    assert_eq!(applied.len(), 1);
    let a = &applied[0];
    assert_eq!(a.files_rewritten, 0, "{a:?}");
    assert_eq!(
        a.files_dropped, 6,
        "January to March, two files each: {a:?}"
    );
    assert_eq!(a.rows_deleted, 60);
    let py = f.py_scan("shop.events", None);
    assert_eq!(rows(&py), 60);
    assert_eq!(py["files"], 6);
    check_partition_summaries(&f, "shop.events").await;
    // Again for the same day: nothing is due, nothing is committed.
    let again = lethe::lifecycle::retention::apply(f.wh(), &gov.retention, day, false)
        .await
        .unwrap();
    assert_eq!(again[0].snapshot_id, None);
}

/// A bucket-partitioned table: the erasure reads only the subject's bucket, as PyIceberg
/// plans it.
#[tokio::test(flavor = "multi_thread")]
async fn bucket_partitioned_accounts_read_one_bucket() {
    let f = Foreign::new(FormatVersion::V2, "").await;
    f.create(
        "shop.accounts",
        accounts_schema(),
        Some(spec(2, "customer_bucket", Transform::Bucket(8))),
        FormatVersion::V2,
    )
    .await;
    f.append("shop.accounts", &accounts(1..=80)).await;
    check_partition_summaries(&f, "shop.accounts").await;
    let py = f.py_scan("shop.accounts", Some(&format!("customer_id = {SUBJECT}")));
    assert_eq!(py["files"], 1, "{py}");
    assert_eq!(rows(&py), 4);
    let dry = dry_run(
        f.wh(),
        &name("shop.accounts"),
        &RowRewrite::delete(Predicate::eq("customer_id", Value::Int(SUBJECT))),
    )
    .await
    .unwrap();
    assert!(dry.files_in_table > 1, "{dry:?}");
    assert_eq!(dry.files_read, 1, "{dry:?}");
    assert_eq!(dry.rows_matched, 4);

    erase_and_check(&f, &["shop.accounts", "crm.customers"]).await;
    assert_eq!(rows(&f.py_scan("shop.accounts", None)), 76);
    check_partition_summaries(&f, "shop.accounts").await;
}

/// Format v1 tables (no sequence numbers, v1 manifests) are erased in format v1.
#[tokio::test(flavor = "multi_thread")]
async fn v1_tables_are_erased_in_v1() {
    let f = Foreign::new(FormatVersion::V1, "").await;
    f.create("shop.orders", orders_schema(), None, FormatVersion::V1)
        .await;
    f.append("shop.orders", &orders(1..=20)).await;
    f.append("shop.orders", &orders(21..=40)).await;
    let py = f.py_scan("shop.orders", None);
    assert_eq!(
        (rows(&py), py["format_version"].as_i64()),
        (40, Some(1)),
        "{py}"
    );

    erase_and_check(&f, &["shop.orders", "crm.customers"]).await;
    for (t, n) in [("shop.orders", 38), ("crm.customers", CUSTOMERS - 1)] {
        let py = f.py_scan(t, None);
        assert_eq!(
            (rows(&py), py["format_version"].as_i64()),
            (n, Some(1)),
            "{t}: {py}"
        );
        let loaded = f.wh().load_str(t).await.unwrap();
        assert_eq!(loaded.metadata.format_version(), FormatVersion::V1);
        for s in loaded.metadata.snapshots() {
            assert_eq!(
                s.sequence_number(),
                0,
                "{t}: v1 snapshots have no sequence number"
            );
        }
    }
}

/// A personal column renamed (and a column added, another dropped) since files were
/// written: predicates, metrics properties and the proof scan's decoding of old manifests'
/// bounds all resolve it by field id.
#[tokio::test(flavor = "multi_thread")]
async fn renamed_personal_column_is_resolved_by_field_id() {
    // `full_name` is dropped below: the subject's identifying value is the renamed column.
    let f = Foreign::bare(
        "",
        "[customer]\nidentifiers = [\"crm.customers.customer_id\"]\nvalues = [\"contact_email\"]\n",
    );
    let t = name("crm.customers");
    f.wh()
        .create_table(
            &t,
            customers_schema(),
            None,
            None,
            HashMap::from([(
                "write.metadata.metrics.default".to_string(),
                "full".to_string(),
            )]),
            FormatVersion::V2,
        )
        .await
        .unwrap();
    // Written under the old name; the subject's email is the file's smallest, so full
    // metrics put it in the manifest as a lower bound.
    f.append("crm.customers", &customers(1..=10)).await;
    let old = f
        .wh()
        .load(&t)
        .await
        .unwrap()
        .metadata
        .current_schema()
        .as_ref()
        .clone();
    let mut evolved = renamed(&old, "email", "contact_email").unwrap();
    // Add `tier` (field 4), drop `full_name` (field 3).
    let fields: Vec<_> = evolved
        .as_struct()
        .fields()
        .iter()
        .filter(|f| f.name != "full_name")
        .cloned()
        .chain([std::sync::Arc::new(iceberg::spec::NestedField::optional(
            4,
            "tier",
            Type::Primitive(PrimitiveType::String),
        ))])
        .collect();
    evolved = Schema::builder()
        .with_schema_id(evolved.schema_id())
        .with_identifier_field_ids(vec![1])
        .with_fields(fields)
        .build()
        .unwrap();
    set_schema(f.wh(), &t, evolved).await.unwrap();
    let newer = customers(11..=CUSTOMERS);
    let newer = RecordBatch::try_new(
        std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
            newer.schema().field(0).clone(),
            arrow::datatypes::Field::new("contact_email", arrow::datatypes::DataType::Utf8, true),
            arrow::datatypes::Field::new("tier", arrow::datatypes::DataType::Utf8, true),
        ])),
        vec![
            newer.column(0).clone(),
            newer.column(1).clone(),
            std::sync::Arc::new(arrow::array::StringArray::from(vec![Some("gold"); 10])),
        ],
    )
    .unwrap();
    f.append("crm.customers", &newer).await;

    // Predicates name current columns and find rows of files written before the change.
    let loaded = f.wh().load(&t).await.unwrap();
    let count = |p: Predicate| {
        let (wh, loaded) = (f.wh(), loaded.clone());
        async move { count_rows(wh, &loaded, &p).await.unwrap().0 }
    };
    assert_eq!(
        count(Predicate::eq("contact_email", Value::Str(email(3)))).await,
        1
    );
    assert_eq!(count(Predicate::IsNull("tier".into())).await, 10);
    let py = f.py_scan(
        "crm.customers",
        Some(&format!("contact_email = '{}'", email(3))),
    );
    assert_eq!(rows(&py), 1, "{py}");
    assert_eq!(rows(&f.py_scan("crm.customers", Some("tier is null"))), 10);

    // The metrics properties follow the field: `email` was classified personal, and its new
    // name gets `none`; nothing is generated under the old name.
    let gov = f.ws.governance().unwrap();
    let g = lethe::lifecycle::properties::generate(&loaded, &gov);
    assert_eq!(
        g.set
            .get("write.metadata.metrics.column.contact_email")
            .map(String::as_str),
        Some(gov.retention.value.statistics.protected.as_str()),
        "{g:?}"
    );
    assert!(!g.set.keys().any(|k| k.ends_with(".email")), "{g:?}");

    // The old manifest keeps the subject's email as a bound of field 2, named `email` in the
    // schema that manifest carries: the proof scan decodes it there.
    let before = proof_before(&f).await;
    // (The hit names the field as that manifest's schema does, `email`, not as the table's
    // current schema does.)
    assert!(
        before.hits.iter().any(|h| h.place == "ManifestBound"
            && h.trace.starts_with("value")
            && h.detail.contains("field id 2 (`email`)")),
        "{:#?}",
        before.hits
    );

    erase_and_check(&f, &["crm.customers"]).await;
    assert_eq!(rows(&f.py_scan("crm.customers", None)), CUSTOMERS - 1);
}

/// Every transform lethe writes (identity, year, month, day, hour, bucket, truncate): lethe's
/// pruning reads the files PyIceberg plans for the same filter, both count the same rows, and
/// the manifests' partition summaries are exact.
#[tokio::test(flavor = "multi_thread")]
async fn partition_transforms_prune_like_pyiceberg() {
    let f = Foreign::bare("", &subjects("email"));
    let schema = Schema::builder()
        .with_fields(vec![
            iceberg::spec::NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long))
                .into(),
            iceberg::spec::NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String))
                .into(),
            iceberg::spec::NestedField::optional(
                3,
                "at",
                Type::Primitive(PrimitiveType::Timestamp),
            )
            .into(),
        ])
        .build()
        .unwrap();
    let names = ["alpha", "alpine", "beta", "bravo", "gamma", "golf"];
    let at = |i: i64| {
        chrono::NaiveDate::from_ymd_opt(2024, 1, 1)
            .unwrap()
            .and_hms_opt((i % 24) as u32, 0, 0)
            .unwrap()
            + Duration::days(i * 13)
    };
    let batch = |r: std::ops::RangeInclusive<i64>| {
        let v: Vec<i64> = r.collect();
        RecordBatch::try_new(
            std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
                arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
                arrow::datatypes::Field::new("name", arrow::datatypes::DataType::Utf8, true),
                arrow::datatypes::Field::new(
                    "at",
                    arrow::datatypes::DataType::Timestamp(
                        arrow::datatypes::TimeUnit::Microsecond,
                        None,
                    ),
                    true,
                ),
            ])),
            vec![
                std::sync::Arc::new(arrow::array::Int64Array::from(v.clone())),
                std::sync::Arc::new(arrow::array::StringArray::from(
                    v.iter()
                        .map(|i| Some(names[(*i % 6) as usize]))
                        .collect::<Vec<_>>(),
                )),
                std::sync::Arc::new(arrow::array::TimestampMicrosecondArray::from(
                    v.iter()
                        .map(|i| at(*i).and_utc().timestamp_micros())
                        .collect::<Vec<_>>(),
                )),
            ],
        )
        .unwrap()
    };
    let probe = at(10);
    let probe_text = probe.format("%Y-%m-%dT%H:%M:%S").to_string();
    let cases: Vec<(&str, i32, Transform, Predicate, String)> = vec![
        (
            "identity",
            2,
            Transform::Identity,
            Predicate::eq("name", Value::Str("beta".into())),
            "name = 'beta'".into(),
        ),
        (
            "year",
            3,
            Transform::Year,
            Predicate::eq("at", Value::Timestamp(probe)),
            format!("at = '{probe_text}'"),
        ),
        (
            "month",
            3,
            Transform::Month,
            Predicate::eq("at", Value::Timestamp(probe)),
            format!("at = '{probe_text}'"),
        ),
        (
            "day",
            3,
            Transform::Day,
            Predicate::eq("at", Value::Timestamp(probe)),
            format!("at = '{probe_text}'"),
        ),
        (
            "hour",
            3,
            Transform::Hour,
            Predicate::eq("at", Value::Timestamp(probe)),
            format!("at = '{probe_text}'"),
        ),
        (
            "bucket",
            1,
            Transform::Bucket(5),
            Predicate::eq("id", Value::Int(10)),
            "id = 10".into(),
        ),
        (
            "truncate",
            2,
            Transform::Truncate(3),
            Predicate::eq("name", Value::Str("alpine".into())),
            "name = 'alpine'".into(),
        ),
    ];
    let mut specs: Vec<String> = Vec::new();
    let mut planned = Vec::new();
    for (label, source, transform, predicate, filter) in cases {
        let table = format!("parts.{label}");
        f.create(
            &table,
            schema.clone(),
            Some(spec(source, &format!("p_{label}"), transform)),
            FormatVersion::V2,
        )
        .await;
        f.append(&table, &batch(1..=24)).await;
        f.append(&table, &batch(25..=48)).await;
        check_partition_summaries(&f, &table).await;
        let dry = dry_run(f.wh(), &name(&table), &RowRewrite::delete(predicate))
            .await
            .unwrap();
        specs.push(table.clone());
        specs.push(format!("{table}|{filter}"));
        planned.push((label, table, filter, dry));
    }
    let py = f.py_scans(&specs.iter().map(String::as_str).collect::<Vec<_>>());
    for (label, table, filter, dry) in planned {
        let all = &py[&table];
        let hit = &py[&format!("{table}|{filter}")];
        assert_eq!(rows(all), 48, "{label}: {all}");
        assert_eq!(
            dry.files_in_table as i64,
            all["files"].as_i64().unwrap(),
            "{label}"
        );
        assert!(
            (dry.files_read as i64) < all["files"].as_i64().unwrap(),
            "{label}: no pruning: {dry:?}"
        );
        assert_eq!(
            dry.files_read as i64,
            hit["files"].as_i64().unwrap(),
            "{label}: {hit} vs {dry:?}"
        );
        assert_eq!(dry.rows_matched as i64, rows(hit), "{label}: {hit}");
        assert!(dry.rows_matched > 0, "{label}");
    }
}

/// Issue 18: reads pruned by Parquet statistics, page indexes and predicate columns find every
/// row a full read finds. Random tables (files with overlapping id ranges, several row groups
/// per file, NULLs, integer and string IDs, unpartitioned, identity- and bucket-partitioned)
/// and random `IN` selections: `select_rows`, `count_rows`, a dry run and the committed
/// delete agree with a brute-force filter of every row.
#[tokio::test(flavor = "multi_thread")]
async fn pruned_reads_find_every_matching_row_on_random_tables() {
    use std::sync::Arc;

    use arrow::array::{Int32Array, Int64Array, StringArray};
    use iceberg::spec::NestedField;
    use lethe_iceberg::ops::rewrite::{append, rewrite_rows, select_rows};
    use lethe_iceberg::writer::WriteOptions;
    use rand::{Rng, SeedableRng};

    let seed = crate::common::seed(rand::random());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let f = Foreign::bare("", &subjects("email"));
    let schema = Schema::builder()
        .with_fields(vec![
            Arc::new(NestedField::required(
                1,
                "id",
                Type::Primitive(PrimitiveType::Long),
            )),
            Arc::new(NestedField::optional(
                2,
                "code",
                Type::Primitive(PrimitiveType::String),
            )),
            Arc::new(NestedField::optional(
                3,
                "grp",
                Type::Primitive(PrimitiveType::Int),
            )),
        ])
        .build()
        .unwrap();
    let ids_of = |batches: &[RecordBatch]| -> Vec<(i64, Option<String>)> {
        let mut out: Vec<(i64, Option<String>)> = Vec::new();
        for b in batches {
            let id = b.column(0).as_primitive::<arrow::datatypes::Int64Type>();
            let code = b.column(1).as_string::<i32>();
            for i in 0..b.num_rows() {
                out.push((
                    id.value(i),
                    arrow::array::Array::is_valid(code, i).then(|| code.value(i).to_string()),
                ));
            }
        }
        out.sort();
        out
    };
    for round in 0..6 {
        let table = format!("shop.pruned_{round}");
        let partition = match round % 3 {
            0 => None,
            1 => Some(spec(3, "grp", Transform::Identity)),
            _ => Some(spec(1, "id_bucket", Transform::Bucket(4))),
        };
        let mut props: HashMap<String, String> = [(
            "write.parquet.row-group-limit".to_string(),
            rng.random_range(10..200usize).to_string(),
        )]
        .into();
        // Manifest bounds of `code` cut to 6 characters (the upper one incremented, as Java
        // truncates): every file's bounds overlap, the manifests prune nothing on `code`.
        if round % 2 == 1 {
            props.insert(
                "write.metadata.metrics.default".to_string(),
                "truncate(6)".to_string(),
            );
        }
        f.wh()
            .create_table(
                &name(&table),
                schema.clone(),
                partition,
                None,
                props,
                FormatVersion::V2,
            )
            .await
            .unwrap();
        let spread = rng.random_range(50..3000i64);
        for _ in 0..rng.random_range(2..7) {
            let n = rng.random_range(1..800usize);
            let mut ids: Vec<i64> = (0..n).map(|_| rng.random_range(0..spread)).collect();
            if rng.random_bool(0.5) {
                ids.sort_unstable();
            }
            let codes: Vec<Option<String>> = ids
                .iter()
                .map(|i| (!rng.random_bool(0.1)).then(|| format!("code-{i:05}")))
                .collect();
            let grps: Vec<Option<i32>> = ids.iter().map(|i| Some((*i % 3) as i32)).collect();
            let batch = RecordBatch::try_new(
                lethe_iceberg::writer::arrow_schema(&schema).unwrap(),
                vec![
                    Arc::new(Int64Array::from(ids.clone())),
                    Arc::new(StringArray::from(codes)),
                    Arc::new(Int32Array::from(grps)),
                ],
            )
            .unwrap();
            append(
                f.wh(),
                &name(&table),
                &[batch],
                Default::default(),
                WriteOptions::default(),
            )
            .await
            .unwrap();
        }
        let t = f.wh().load(&name(&table)).await.unwrap();
        let all = ids_of(&select_rows(f.wh(), &t, &Predicate::True).await.unwrap());
        for _ in 0..8 {
            let pick: Vec<i64> = (0..rng.random_range(0..5))
                .map(|_| rng.random_range(-3..spread + 3))
                .collect();
            let by_code = rng.random_bool(0.5);
            let p = if by_code {
                Predicate::is_in(
                    "code",
                    pick.iter()
                        .map(|i| Value::Str(format!("code-{i:05}")))
                        .collect(),
                )
            } else {
                Predicate::is_in("id", pick.iter().map(|i| Value::Int(*i)).collect())
            };
            let expected: Vec<(i64, Option<String>)> = all
                .iter()
                .filter(|(id, code)| {
                    if by_code {
                        code.as_ref()
                            .is_some_and(|c| pick.iter().any(|i| c == &format!("code-{i:05}")))
                    } else {
                        pick.contains(id)
                    }
                })
                .cloned()
                .collect();
            let got = ids_of(&select_rows(f.wh(), &t, &p).await.unwrap());
            assert_eq!(got, expected, "seed {seed}, {table}: {p:?}");
            let (matched, total) = count_rows(f.wh(), &t, &p).await.unwrap();
            assert_eq!(
                matched as usize,
                expected.len(),
                "seed {seed}, {table}: {p:?}"
            );
            assert_eq!(total as usize, all.len(), "seed {seed}, {table}");
            let dry = dry_run(f.wh(), &name(&table), &RowRewrite::delete(p.clone()))
                .await
                .unwrap();
            assert_eq!(
                dry.rows_matched as usize,
                expected.len(),
                "seed {seed}: {dry:?}"
            );
        }
        // One committed delete: exactly the selected rows are gone.
        let pick: Vec<i64> = (0..3).map(|_| rng.random_range(0..spread)).collect();
        let p = Predicate::is_in("id", pick.iter().map(|i| Value::Int(*i)).collect());
        let r = rewrite_rows(f.wh(), &name(&table), &RowRewrite::delete(p))
            .await
            .unwrap();
        let t = f.wh().load(&name(&table)).await.unwrap();
        let left = ids_of(&select_rows(f.wh(), &t, &Predicate::True).await.unwrap());
        let kept: Vec<(i64, Option<String>)> = all
            .iter()
            .filter(|(id, _)| !pick.contains(id))
            .cloned()
            .collect();
        assert_eq!(left, kept, "seed {seed}, {table}: {r:?}");
        assert_eq!(
            r.rows_matched as usize,
            all.len() - kept.len(),
            "seed {seed}"
        );
    }
}

/// A table whose properties ask for a bloom filter on customer_id (as Spark or Trino users
/// set them): lethe's appends and copy-on-write rewrites write it, the subject's ID is out of
/// the rewritten file's filter, and PyIceberg reads the table.
#[tokio::test(flavor = "multi_thread")]
async fn bloom_filter_properties_carry_into_rewritten_files() {
    let f = Foreign::new(FormatVersion::V2, "").await;
    f.wh()
        .create_table(
            &name("shop.orders"),
            orders_schema(),
            None,
            None,
            HashMap::from([(
                "write.parquet.bloom-filter-enabled.column.customer_id".to_string(),
                "true".to_string(),
            )]),
            FormatVersion::V2,
        )
        .await
        .unwrap();
    // Two files: one with the subject's orders, one without (its bounds still span the ID).
    f.append("shop.orders", &orders(1..=100)).await;
    f.append(
        "shop.orders",
        &orders((101..=200).filter(|o| customer_of(*o) != SUBJECT)),
    )
    .await;
    let table = f.wh().load(&name("shop.orders")).await.unwrap();
    let files = f.wh().current_files(&table).await.unwrap();
    assert_eq!(files.len(), 2);
    for file in &files {
        let blooms = column_blooms(file.entry.data_file.file_path(), "customer_id");
        assert_eq!(blooms.len(), 1, "{}", file.entry.data_file.file_path());
        assert!(
            (1..=CUSTOMERS)
                .filter(|c| *c != SUBJECT)
                .all(|c| blooms[0].check(&c))
        );
    }
    let r = rewrite_rows(
        f.wh(),
        &name("shop.orders"),
        &RowRewrite::delete(Predicate::eq("customer_id", Value::Int(SUBJECT))),
    )
    .await
    .unwrap();
    assert_eq!((r.files_rewritten.len(), r.rows_matched), (1, 5), "{r:?}");
    let [added] = r.files_added.as_slice() else {
        panic!("{r:?}")
    };
    let blooms = column_blooms(added, "customer_id");
    assert_eq!(blooms.len(), 1);
    assert!(
        !blooms[0].check(&SUBJECT),
        "the rewritten file's filter still has the subject"
    );
    assert!(
        (1..=CUSTOMERS)
            .filter(|c| *c != SUBJECT)
            .all(|c| blooms[0].check(&c))
    );
    let py = f.py_scan("shop.orders", None);
    assert_eq!(rows(&py), 190, "{py}");
    let py = f.py_scan("shop.orders", Some(&format!("customer_id = {SUBJECT}")));
    assert_eq!(rows(&py), 0, "{py}");
}
