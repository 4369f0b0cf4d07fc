//! Issue 17: format v3 tables — deletion vectors, row lineage and default values — erased,
//! not refused. Fixtures come from lethe's own code ([`lethe_demo::fixtures`]) and from Spark
//! 3.5 with the Iceberg 1.10 runtime (`scripts/spark_tool.py`); each is read by PyIceberg 0.12
//! (which applies deletion vectors itself) before lethe changes it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int64Type};
use iceberg::spec::{FormatVersion, Literal, NestedField, PrimitiveType, Schema, Type};
use lethe::erasure::case::{RequestSpec, read_case};
use lethe::erasure::erase::{erase, prepare};
use lethe::erasure::plan::Action;
use lethe::erasure::prove::{ProveReport, prove};
use lethe::governance::subjects::SubjectRef;
use lethe::workspace::Workspace;
use lethe_demo::fixtures::{GovernanceFiles, delete_by_vector, init_workspace, set_schema};
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::deletion_vector::is_deletion_vector;
use lethe_iceberg::lineage::{LAST_UPDATED_SEQUENCE_NUMBER, ROW_ID};
use lethe_iceberg::ops::rewrite::{RowRewrite, count_rows, rewrite_rows, select_rows_with_lineage};
use lethe_iceberg::predicate::{Predicate, Value};
use lethe_iceberg::table::Warehouse;

use crate::common::{erase_opts, interop_dir, pyiceberg};
use crate::fixtures::*;

fn request(subject: &str, id: &str) -> RequestSpec {
    RequestSpec {
        request: "erasure-0001".into(),
        subject: subject.into(),
        id: id.into(),
    }
}

fn name(s: &str) -> TableName {
    TableName::parse(s).unwrap()
}

fn orders_in(v: &[i64]) -> Predicate {
    Predicate::is_in("order_id", v.iter().map(|i| Value::Int(*i)).collect())
}

/// Row lineage as lethe reads it: key (as text) -> (`_row_id`, `_last_updated_sequence_number`).
async fn lineage(wh: &Warehouse, table: &str, key: &str) -> BTreeMap<String, (i64, i64)> {
    let t = wh.load_str(table).await.unwrap();
    let mut out = BTreeMap::new();
    for b in select_rows_with_lineage(wh, &t, &Predicate::True)
        .await
        .unwrap()
    {
        let keys = arrow::compute::cast(b.column_by_name(key).unwrap(), &DataType::Utf8).unwrap();
        let ids = b
            .column_by_name(ROW_ID)
            .unwrap()
            .as_primitive::<Int64Type>();
        let seqs = b
            .column_by_name(LAST_UPDATED_SEQUENCE_NUMBER)
            .unwrap()
            .as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            assert!(ids.is_valid(i) && seqs.is_valid(i), "row lineage is null");
            out.insert(
                keys.as_string::<i32>().value(i).to_string(),
                (ids.value(i), seqs.value(i)),
            );
        }
    }
    out
}

/// The proof scan with the traces the erasure noted before deleting anything.
async fn proof(ws: &Workspace) -> ProveReport {
    let case = read_case(ws, "erasure-0001").unwrap();
    prove(ws, &[case], &|_| {}).await.unwrap()
}

/// The proof scan before any erasure (traces from a plan), to show it would see the subject.
async fn proof_before(ws: &Workspace, r: &RequestSpec) -> ProveReport {
    let gov = ws.governance().unwrap();
    let p = prepare(ws, &gov, std::slice::from_ref(r), None, &|_| {})
        .await
        .unwrap();
    prove(ws, &p.cases, &|_| {}).await.unwrap()
}

async fn step_of(
    ws: &Workspace,
    subject: &str,
    id: &str,
    table: &str,
) -> lethe::erasure::plan::Step {
    let explained = lethe::erasure::explain::explain(
        ws,
        &SubjectRef {
            subject: subject.into(),
            id: id.into(),
        },
    )
    .await
    .unwrap();
    explained
        .plan
        .steps
        .iter()
        .find(|s| s.table == table)
        .unwrap_or_else(|| panic!("no step for {table}"))
        .clone()
}

fn rows_of(v: &serde_json::Value) -> Vec<serde_json::Value> {
    v["rows"].as_array().cloned().unwrap_or_default()
}

fn local(location: &str) -> PathBuf {
    lethe_iceberg::store::normalize_local(location).unwrap()
}

/// The current metadata's schema with `channel` (id 6) added: initial-default 'web' for the
/// rows written before, write-default 'app' for rows written without it.
fn with_channel(schema: &Schema) -> Schema {
    let mut channel = NestedField::optional(6, "channel", Type::Primitive(PrimitiveType::String));
    channel.initial_default = Some(Literal::string("web"));
    channel.write_default = Some(Literal::string("app"));
    let mut fields = schema.as_struct().fields().to_vec();
    fields.push(Arc::new(channel));
    Schema::builder()
        .with_schema_id(schema.schema_id() + 1)
        .with_fields(fields)
        .build()
        .unwrap()
}

/// lethe's own v3 fixtures: `crm.customers` (one data file, a vector hiding customer 3) and
/// `shop.orders` (files A: orders 1-20 with the subject's 6, B: 21-40 with the subject's 26,
/// Regression (issue 44 item 9): `lethe tables` counted the rows deletion vectors hide (64
/// where PyIceberg, like Spark, reads 60). It counts live rows now, and the stored ones apart.
#[tokio::test(flavor = "multi_thread")]
async fn lethe_tables_counts_rows_as_engines_read_them() {
    let f = Foreign::new(FormatVersion::V3, "").await;
    let wh = f.wh();
    f.create("shop.orders", orders_schema(), None, FormatVersion::V3)
        .await;
    f.append("shop.orders", &orders(1..=20)).await;
    f.append("shop.orders", &orders(21..=40)).await;
    delete_by_vector(wh, &name("shop.orders"), &orders_in(&[6, 10, 30, 33]))
        .await
        .unwrap();
    let py = f.py_v3("shop.orders");
    assert_eq!(py["row_count"], 36, "{py}");
    let listed = lethe_iceberg::inspect::tables(wh).await.unwrap();
    let orders = listed.iter().find(|t| t.table == "shop.orders").unwrap();
    assert_eq!(orders.rows, Some(36), "as PyIceberg reads it: {orders:?}");
    assert_eq!(orders.rows_stored, 40);
    // Every other table: live rows as PyIceberg reads them.
    for t in &listed {
        let py = f.py_v3(&t.table);
        assert_eq!(
            t.rows,
            py["row_count"].as_u64(),
            "{}: lethe tables {:?}, PyIceberg {}",
            t.table,
            t.rows,
            py["row_count"]
        );
    }
}

/// C: 61-80 without the subject; one Puffin file with three vectors hiding 6 and 10 in A, 30
/// in B, 70 in C; then `channel` added with defaults and orders 81-85 appended without it).
/// The erasure rewrites A, B and the customers' file: every row a vector hid in them is gone,
/// their vectors go with them, C's vector stays live in the shared Puffin file, the customers'
/// Puffin file (no live vector left) is swept, and every surviving row keeps its row id.
#[tokio::test(flavor = "multi_thread")]
async fn erasure_purges_rows_deletion_vectors_hide_and_keeps_row_ids() {
    let f = Foreign::new(FormatVersion::V3, "").await;
    let wh = f.wh();
    f.create("shop.orders", orders_schema(), None, FormatVersion::V3)
        .await;
    f.append("shop.orders", &orders(1..=20)).await;
    f.append("shop.orders", &orders(21..=40)).await;
    f.append(
        "shop.orders",
        &orders((61..=80).filter(|o| customer_of(*o) != SUBJECT)),
    )
    .await;
    delete_by_vector(wh, &name("shop.orders"), &orders_in(&[6, 10, 30, 70]))
        .await
        .unwrap();
    delete_by_vector(
        wh,
        &name("crm.customers"),
        &Predicate::eq("customer_id", Value::Int(3)),
    )
    .await
    .unwrap();
    let t = wh.load_str("shop.orders").await.unwrap();
    set_schema(
        wh,
        &name("shop.orders"),
        with_channel(t.metadata.current_schema()),
    )
    .await
    .unwrap();
    f.append("shop.orders", &orders(81..=85)).await;

    // Valid v3 tables: PyIceberg applies the vectors itself and reads the defaults.
    let before = f.py_v3("shop.orders");
    assert_eq!(before["format_version"], 3, "{before}");
    assert_eq!(before["row_count"], 60, "64 stored, 4 hidden");
    assert_eq!(before["deletion_vectors"].as_array().unwrap().len(), 3);
    assert_eq!(
        before["puffin_files"].as_array().unwrap().len(),
        1,
        "one Puffin file"
    );
    let channel = |rows: &[serde_json::Value], order: i64| {
        rows.iter()
            .find(|r| r["order_id"].as_str() == Some(order.to_string().as_str()))
            .map(|r| r["channel"].clone())
    };
    let rows_before = rows_of(&before);
    assert_eq!(
        channel(&rows_before, 1),
        Some("web".into()),
        "initial-default"
    );
    assert_eq!(
        channel(&rows_before, 81),
        Some("app".into()),
        "write-default"
    );
    assert_eq!(channel(&rows_before, 70), None, "hidden by C's vector");
    let customers_before = f.py_v3("crm.customers");
    assert_eq!(customers_before["row_count"], CUSTOMERS - 1);
    let customers_puffin = customers_before["puffin_files"][0]
        .as_str()
        .unwrap()
        .to_string();
    let orders_puffin = before["puffin_files"][0].as_str().unwrap().to_string();
    // Data file C (orders 61-80) and the vector on it.
    let c_vector = before["deletion_vectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| {
            v["record_count"] == 1 && {
                let p = v["referenced_data_file"].as_str().unwrap();
                before["data_files"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|d| d["path"] == p && d["record_count"] == 19)
            }
        })
        .expect("the vector on C")
        .clone();

    // lethe reads the same: vectors applied, defaults filled, row ids assigned by the spec.
    let (subject_rows, total) =
        count_rows(wh, &t, &Predicate::eq("customer_id", Value::Int(SUBJECT)))
            .await
            .unwrap();
    assert_eq!((subject_rows, total), (1, 55), "before the append of 81-85");
    let ids_before = lineage(wh, "shop.orders", "order_id").await;
    assert_eq!(ids_before.len(), 60);
    // A: order k has row id k-1; B: 20..; C: 40.. (19 rows); 81-85: 59..63.
    assert_eq!(ids_before["1"].0, 0);
    assert_eq!(ids_before["40"].0, 39);
    assert_eq!(ids_before["61"].0, 40);
    assert_eq!(ids_before["81"].0, 59);
    assert_eq!(ids_before["85"], (63, 5), "the fifth snapshot's rows");
    assert_eq!(
        wh.load_str("shop.orders")
            .await
            .unwrap()
            .metadata
            .next_row_id(),
        64
    );
    // The query path and discovery's sampling apply the vectors too.
    let ctx = lethe::pipeline::session(&f.ws).await.unwrap();
    let n = ctx
        .sql("SELECT count(*) AS n, count(DISTINCT channel) AS c FROM shop.orders")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let col = |i: usize| n[0].column(i).as_primitive::<Int64Type>().value(0);
    assert_eq!((col(0), col(1)), (60, 2));
    let sample = lethe::onboarding::discover::sample::sample(
        wh,
        &wh.load_str("shop.orders").await.unwrap(),
        &lethe::onboarding::discover::sample::SampleOptions {
            rows: 1000,
            budget: std::time::Duration::from_secs(60),
            seed: 1,
        },
    )
    .await
    .unwrap();
    assert_eq!(sample.rows, 60, "rows hidden by vectors are not sampled");
    assert!(
        sample
            .column("channel")
            .unwrap()
            .values
            .iter()
            .flatten()
            .any(|v| v == "web"),
        "old files sample the initial-default"
    );

    // The plan is no longer UNRESOLVED for vectors, row lineage or defaults.
    let step = step_of(&f.ws, "customer", &SUBJECT.to_string(), "shop.orders").await;
    assert_eq!(step.action, Action::Delete, "{step:?}");
    let before_proof = proof_before(&f.ws, &request("customer", &SUBJECT.to_string())).await;
    assert!(before_proof.files_holding > 0);

    let r = erase(
        &f.ws,
        &[request("customer", &SUBJECT.to_string())],
        &erase_opts(),
        &|_| {},
    )
    .await
    .unwrap();
    assert!(r.journal.finished_at.is_some());
    let p = proof(&f.ws).await;
    assert!(
        p.is_clean(),
        "files still hold the subject: {:#?}\nunreadable: {:?}",
        p.hits,
        p.unreadable
    );

    // PyIceberg reads exactly the rows before minus the subject's; C's row 70 stays hidden.
    let after = f.py_v3("shop.orders");
    let expected: Vec<serde_json::Value> = rows_before
        .iter()
        .filter(|r| r["customer_id"].as_str() != Some(SUBJECT.to_string().as_str()))
        .cloned()
        .collect();
    assert_eq!(rows_of(&after), expected);
    assert_eq!(after["row_count"], 59);
    assert_eq!(after["dangling_deletion_vectors"], serde_json::json!([]));
    assert_eq!(
        after["deletion_vectors"],
        serde_json::json!([c_vector]),
        "{after}"
    );
    assert_eq!(after["puffin_files"], serde_json::json!([orders_puffin]));
    assert!(
        local(&orders_puffin).exists(),
        "C's vector is still live in it"
    );
    let customers_after = f.py_v3("crm.customers");
    assert_eq!(
        customers_after["row_count"],
        CUSTOMERS - 2,
        "3 stays hidden, 7 is gone"
    );
    assert_eq!(customers_after["deletion_vectors"], serde_json::json!([]));
    assert!(
        !local(&customers_puffin).exists(),
        "a Puffin file with no live vector goes with the expired snapshots"
    );
    assert_eq!(
        rows_of(&customers_after),
        rows_of(&customers_before)
            .into_iter()
            .filter(|r| r["customer_id"].as_str() != Some(SUBJECT.to_string().as_str()))
            .collect::<Vec<_>>()
    );

    // Every surviving row keeps its row id and sequence number; rewritten files store them.
    let ids_after = lineage(wh, "shop.orders", "order_id").await;
    let survivors: BTreeMap<String, (i64, i64)> = ids_before
        .iter()
        .filter(|(k, _)| k.as_str() != "26")
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    assert_eq!(ids_after, survivors);
    let t = wh.load_str("shop.orders").await.unwrap();
    assert!(
        t.metadata.next_row_id() > 64,
        "the commits assigned row ids"
    );
    let snap = t.current_snapshot().unwrap();
    assert!(
        snap.first_row_id().is_some(),
        "every v3 snapshot has a first-row-id"
    );
    let old_paths: Vec<&str> = before["data_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    let new_files: Vec<_> = wh
        .current_files(&t)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.is_data() && !old_paths.contains(&f.entry.data_file.file_path()))
        .collect();
    assert_eq!(
        new_files.len(),
        2,
        "A and B rewritten, each into a file of its own"
    );
    for nf in &new_files {
        let (schema, _) =
            lethe_iceberg::read::read_raw(wh.store.as_ref(), nf.entry.data_file.file_path())
                .unwrap();
        assert!(
            lethe_iceberg::deletes::column_by_id(&schema, 2_147_483_540).is_some(),
            "{} stores _row_id",
            nf.entry.data_file.file_path()
        );
    }
}

/// `shop.clicks` as lethe reads it: click id -> (`at`, `at_tz`) in nanoseconds.
async fn clicks(
    wh: &Warehouse,
    t: &lethe_iceberg::table::LoadedTable,
) -> BTreeMap<i64, (i64, i64)> {
    let mut out = BTreeMap::new();
    for b in lethe_iceberg::ops::rewrite::select_rows(wh, t, &Predicate::True)
        .await
        .unwrap()
    {
        let id = b.column(0).as_primitive::<Int64Type>();
        let at = b
            .column(2)
            .as_primitive::<arrow::datatypes::TimestampNanosecondType>();
        let tz = b
            .column(3)
            .as_primitive::<arrow::datatypes::TimestampNanosecondType>();
        for i in 0..b.num_rows() {
            out.insert(id.value(i), (at.value(i), tz.value(i)));
        }
    }
    out
}

/// Format v3's nanosecond timestamps (`timestamp_ns`, `timestamptz_ns`) are written with their
/// bounds, read back to the nanosecond by lethe and PyIceberg, and kept exactly through an
/// erasure's rewrite.
#[tokio::test(flavor = "multi_thread")]
async fn nanosecond_timestamps_are_written_read_and_kept() {
    let f = Foreign::new(FormatVersion::V2, "").await;
    let wh = f.wh();
    let schema = Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "click_id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "customer_id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(3, "at", Type::Primitive(PrimitiveType::TimestampNs)).into(),
            NestedField::optional(4, "at_tz", Type::Primitive(PrimitiveType::TimestamptzNs)).into(),
        ])
        .build()
        .unwrap();
    f.create("shop.clicks", schema, None, FormatVersion::V3)
        .await;
    let base = 1_767_225_600_123_456_789i64; // 2026-01-01T00:00:00.123456789
    let ids: Vec<i64> = (0..12).collect();
    let at: Vec<i64> = ids.iter().map(|i| base + i * 1_001).collect();
    let batch = RecordBatch::try_new(
        Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("click_id", DataType::Int64, false),
            arrow::datatypes::Field::new("customer_id", DataType::Int64, true),
            arrow::datatypes::Field::new(
                "at",
                DataType::Timestamp(arrow::datatypes::TimeUnit::Nanosecond, None),
                true,
            ),
            arrow::datatypes::Field::new(
                "at_tz",
                DataType::Timestamp(
                    arrow::datatypes::TimeUnit::Nanosecond,
                    Some("+00:00".into()),
                ),
                true,
            ),
        ])),
        vec![
            Arc::new(arrow::array::Int64Array::from(ids.clone())),
            Arc::new(arrow::array::Int64Array::from(
                ids.iter().map(|i| i % 3 + 6).collect::<Vec<_>>(),
            )),
            Arc::new(arrow::array::TimestampNanosecondArray::from(at.clone())),
            Arc::new(
                arrow::array::TimestampNanosecondArray::from(at.clone()).with_timezone("+00:00"),
            ),
        ],
    )
    .unwrap();
    f.append("shop.clicks", &batch).await;
    let t = wh.load_str("shop.clicks").await.unwrap();
    let file = wh
        .current_files(&t)
        .await
        .unwrap()
        .into_iter()
        .find(|f| f.is_data())
        .unwrap();
    assert_eq!(
        file.entry.data_file.lower_bounds().get(&3),
        Some(&iceberg::spec::Datum::timestamp_nanos(base)),
        "nanosecond bounds"
    );
    let before = clicks(wh, &t).await;
    assert_eq!(before[&5], (base + 5 * 1_001, base + 5 * 1_001));
    let py = f.py_v3("shop.clicks");
    assert_eq!(py["row_count"], 12, "{py}");
    assert!(
        rows_of(&py)
            .iter()
            .any(|r| r["at"].as_str().unwrap().contains("00:00:00.123461794")),
        "PyIceberg reads nanoseconds: {py}"
    );
    erase(
        &f.ws,
        &[request("customer", &SUBJECT.to_string())],
        &erase_opts(),
        &|_| {},
    )
    .await
    .unwrap();
    let after = clicks(wh, &wh.load_str("shop.clicks").await.unwrap()).await;
    let expected: BTreeMap<i64, (i64, i64)> = before
        .into_iter()
        .filter(|(id, _)| id % 3 + 6 != SUBJECT)
        .collect();
    assert_eq!(after, expected);
    assert_eq!(f.py_v3("shop.clicks")["row_count"], 8);
}

/// A corrupt deletion vector (bad magic, bad checksum, a length field past the blob, a blob
/// past the end of its Puffin file) is an error naming the Puffin file; nothing changes, and
/// the proof scan reports the file unreadable.
#[tokio::test(flavor = "multi_thread")]
async fn corrupt_deletion_vectors_are_errors_naming_the_file() {
    let f = Foreign::new(FormatVersion::V2, "").await;
    let wh = f.wh();
    f.create("shop.orders", orders_schema(), None, FormatVersion::V3)
        .await;
    f.append("shop.orders", &orders(1..=20)).await;
    delete_by_vector(wh, &name("shop.orders"), &orders_in(&[3, 6]))
        .await
        .unwrap();
    let t = wh.load_str("shop.orders").await.unwrap();
    let dv = wh
        .current_files(&t)
        .await
        .unwrap()
        .into_iter()
        .find(|f| is_deletion_vector(&f.entry.data_file))
        .unwrap();
    let puffin = dv.entry.data_file.file_path().to_string();
    let offset = dv.entry.data_file.content_offset().unwrap() as usize;
    let size = dv.entry.data_file.content_size_in_bytes().unwrap() as usize;
    let path = local(&puffin);
    let good = std::fs::read(&path).unwrap();
    type Corrupt = Box<dyn Fn(&mut Vec<u8>)>;
    let corruptions: [(&str, Corrupt); 4] = [
        ("bad magic", Box::new(move |b| b[offset + 4] ^= 0xFF)),
        ("checksum", Box::new(move |b| b[offset + size - 1] ^= 0x01)),
        (
            "length field",
            Box::new(move |b| b[offset + 3] = b[offset + 3].wrapping_add(9)),
        ),
        (
            "past the end of the file",
            Box::new(move |b| b.truncate(offset + size - 2)),
        ),
    ];
    let pointers = f.pointers().await;
    let files_in = |dir: &Path| walk(dir).len();
    let table_dir = local(t.location());
    let stored = files_in(&table_dir);
    for (what, corrupt) in &corruptions {
        let mut bytes = good.clone();
        corrupt(&mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        let e = count_rows(wh, &t, &Predicate::True)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains(&puffin) && e.contains(what), "{what}: {e}");
        let e = rewrite_rows(
            wh,
            &name("shop.orders"),
            &RowRewrite::delete(Predicate::eq("customer_id", Value::Int(SUBJECT))),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(e.contains(&puffin), "{what}: {e}");
        let e = erase(
            &f.ws,
            &[request("customer", &SUBJECT.to_string())],
            &erase_opts(),
            &|_| {},
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(e.contains(&puffin), "{what}: {e}");
        assert_eq!(f.pointers().await, pointers, "{what}: no table changed");
        assert_eq!(files_in(&table_dir), stored, "{what}: no file left behind");
        // The proof scan can't read the file either: it can't be proven clean.
        let traces = lethe_scan::TraceSet::new(
            &[lethe_scan::SubjectTraces {
                label: "s".into(),
                ids: Vec::new(),
                values: vec![lethe_scan::ValueTrace {
                    kind: "email".into(),
                    value: SUBJECT_EMAIL.into(),
                }],
            }],
            8,
        )
        .unwrap();
        let report = lethe_scan::scan_bytes(&traces, &puffin, &bytes, false);
        assert!(report.is_unreadable(), "{what}: {:?}", report.status);
    }
    std::fs::write(&path, &good).unwrap();
    assert_eq!(count_rows(wh, &t, &Predicate::True).await.unwrap().1, 18);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Every table's metadata location, from the catalog alone.
async fn raw_pointers(wh: &Warehouse) -> BTreeMap<String, Option<String>> {
    let mut out = BTreeMap::new();
    for n in wh.tables().await.unwrap() {
        out.insert(
            n.to_string(),
            wh.catalog.metadata_location(&n).await.unwrap(),
        );
    }
    out
}

/// A column type the iceberg crate can't represent (`variant`) is named as the reason the
/// table's step is UNRESOLVED; the erasure refuses and nothing changes.
#[tokio::test(flavor = "multi_thread")]
async fn a_variant_column_is_the_reason_its_step_is_unresolved() {
    let f = Foreign::new(FormatVersion::V2, "").await;
    let wh = f.wh();
    let t = f
        .create("shop.orders", orders_schema(), None, FormatVersion::V3)
        .await;
    f.append("shop.orders", &orders(1..=5)).await;
    let t = wh.load(&t.name).await.unwrap();
    // Add `payload variant` as Iceberg Java's schema update would (the iceberg crate can't).
    let mut json: serde_json::Value =
        serde_json::from_slice(&wh.store.read(&t.metadata_location).unwrap()).unwrap();
    let mut schema = json["schemas"][0].clone();
    schema["schema-id"] = 1.into();
    schema["fields"].as_array_mut().unwrap().push(
        serde_json::json!({"id": 6, "name": "payload", "required": false, "type": "variant"}),
    );
    json["schemas"].as_array_mut().unwrap().push(schema);
    json["current-schema-id"] = 1.into();
    json["last-column-id"] = 6.into();
    let next = lethe_iceberg::table::new_metadata_location(t.location(), 9);
    wh.store
        .write_new(&next, &serde_json::to_vec(&json).unwrap())
        .unwrap();
    lethe_iceberg::catalog::SqlCatalog::open(wh.catalog.name(), &f.dir.join("catalog.db"))
        .unwrap()
        .swap_location(&t.name, &t.metadata_location, &next)
        .await
        .unwrap();
    let e = wh.load(&t.name).await.unwrap_err().to_string();
    assert!(e.contains("`payload` is `variant`"), "{e}");

    let pointers = raw_pointers(wh).await;
    let step = step_of(&f.ws, "customer", &SUBJECT.to_string(), "shop.orders").await;
    assert_eq!(step.action, Action::Unresolved, "{step:?}");
    let reason = step.reason.unwrap_or_default();
    assert!(reason.contains("`payload` is `variant`"), "{reason}");
    let e = erase(
        &f.ws,
        &[request("customer", &SUBJECT.to_string())],
        &erase_opts(),
        &|_| {},
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("shop.orders"), "{e}");
    assert_eq!(raw_pointers(wh).await, pointers, "no table changed");
}

/// Spark's environment: the variables `scripts/test.sh` exported, else `scripts/spark-env.sh`'s
/// output. Without Java 17/11 the test fails ([`crate::common::spark_vars`]), never skips.
pub(crate) fn spark_env() -> Vec<(String, String)> {
    let keys = [
        "LETHE_SPARK_PYTHON",
        "LETHE_SPARK_JAVA_HOME",
        "LETHE_SPARK_JARS",
    ];
    if keys.iter().all(|k| std::env::var(k).is_ok()) {
        return keys
            .iter()
            .map(|k| (k.to_string(), std::env::var(k).unwrap()))
            .collect();
    }
    crate::common::spark_env_from_script()
}

/// Runs `commands` (argument lists without the catalog options) in one Spark session against
/// the workspace in `dir`; one JSON object per command.
pub(crate) fn spark_batch(
    env: &[(String, String)],
    dir: &Path,
    commands: &[Vec<&str>],
) -> Vec<serde_json::Value> {
    let file = dir.join(format!("spark-batch-{}.jsonl", uuid::Uuid::new_v4()));
    let lines: Vec<String> = commands
        .iter()
        .map(|c| serde_json::to_string(c).unwrap())
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let python = env
        .iter()
        .find(|(k, _)| k == "LETHE_SPARK_PYTHON")
        .map(|(_, v)| v.clone())
        .expect("LETHE_SPARK_PYTHON");
    let out = Command::new(python)
        .arg(interop_dir().join("../../scripts/spark_tool.py"))
        .arg("batch")
        .arg("--catalog-uri")
        .arg(format!("jdbc:sqlite:{}", dir.join("catalog.db").display()))
        .arg("--warehouse")
        .arg(dir.join("warehouse"))
        .arg(&file)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .expect("run spark_tool.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "spark_tool.py batch failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Spark's rows without the lineage columns, keyed by `event_id`, values as text.
fn spark_rows(v: &serde_json::Value) -> BTreeMap<String, serde_json::Value> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let mut r = r.as_object().unwrap().clone();
            r.remove(ROW_ID);
            r.remove(LAST_UPDATED_SEQUENCE_NUMBER);
            let r: serde_json::Map<String, serde_json::Value> = r
                .into_iter()
                .map(|(k, v)| {
                    let t = match v {
                        serde_json::Value::Null => serde_json::Value::Null,
                        serde_json::Value::String(s) => s.into(),
                        other => other.to_string().into(),
                    };
                    (k, t)
                })
                .collect();
            (r["event_id"].as_str().unwrap().to_string(), r.into())
        })
        .collect()
}

fn spark_lineage(v: &serde_json::Value) -> BTreeMap<String, (i64, i64)> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["event_id"].as_str().unwrap().to_string(),
                (
                    r[ROW_ID].as_i64().unwrap(),
                    r[LAST_UPDATED_SEQUENCE_NUMBER].as_i64().unwrap(),
                ),
            )
        })
        .collect()
}

const SPARK_SUBJECTS: &str = "[learner]\nidentifiers = [\"lms.v3_dv.learner_id\"]\n";
const SPARK_METADATA: &str = r#"
[tables."lms.v3_dv"]
owner = "lms"
key = ["event_id"]
[tables."lms.v3_dv".columns]
learner_id = { classification = "internal", identifies = "learner" }
"#;

/// Spark writes a format v3 table with merge-on-read DELETE and UPDATE (three deletion vectors
/// in one Puffin file: on two files holding the subject and one that doesn't), row lineage,
/// and a column added with a default; lethe erases the subject; Spark and PyIceberg then read
/// exactly the expected rows (rows the surviving vector hides stay hidden), no vector names a
/// removed data file, the proof scan is clean, and every surviving row keeps the `_row_id` and
/// `_last_updated_sequence_number` Spark gave it — read back through Spark and through lethe.
#[tokio::test(flavor = "multi_thread")]
async fn spark_deletion_vectors_are_erased_and_row_ids_stay() {
    let env = spark_env();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ws");
    let ws = init_workspace(
        &dir,
        GovernanceFiles {
            metadata: SPARK_METADATA,
            retention: "",
            subjects: SPARK_SUBJECTS,
        },
    )
    .unwrap();
    let table = "lms.v3_dv";
    let out = spark_batch(
        &env,
        &dir,
        &[
            vec![
                "create-fixture",
                "--table",
                table,
                "--kind",
                "v3-dv",
                "--generate",
                "300",
                "--subject",
                "3590",
            ],
            vec!["read-table", "--table", table, "--with-row-lineage"],
            vec!["describe-files", "--table", table],
        ],
    );
    let (spark_before, files_before) = (&out[1], &out[2]);
    assert_eq!(files_before["deletion_vectors"], 3, "{files_before}");
    assert_eq!(files_before["puffin_files"].as_array().unwrap().len(), 1);
    let py = pyiceberg(&dir, "read_v3.py", &[table], None)[table].clone();
    assert_eq!(
        py["row_count"], spark_before["row_count"],
        "PyIceberg reads Spark's table"
    );
    let rows_before = spark_rows(spark_before);
    let subject_rows = rows_before
        .values()
        .filter(|r| r["learner_id"] == "3590")
        .count();
    assert!(subject_rows > 0);

    // lethe reads Spark's row lineage as Spark does (inherited ids, ids Spark's UPDATE wrote).
    let lethe_before = lineage(&ws.warehouse, table, "event_id").await;
    assert_eq!(lethe_before, spark_lineage(spark_before));
    let step = step_of(&ws, "learner", "3590", table).await;
    assert_eq!(step.action, Action::Delete, "{step:?}");

    let r = erase(&ws, &[request("learner", "3590")], &erase_opts(), &|_| {})
        .await
        .unwrap();
    assert!(r.journal.finished_at.is_some());
    let p = proof(&ws).await;
    assert!(p.is_clean(), "{:#?}\n{:?}", p.hits, p.unreadable);

    let out = spark_batch(
        &env,
        &dir,
        &[
            vec!["read-table", "--table", table, "--with-row-lineage"],
            vec!["describe-files", "--table", table],
        ],
    );
    let (spark_after, files_after) = (&out[0], &out[1]);
    let expected: BTreeMap<String, serde_json::Value> = rows_before
        .into_iter()
        .filter(|(_, r)| r["learner_id"] != "3590")
        .collect();
    assert_eq!(
        spark_rows(spark_after),
        expected,
        "Spark reads the expected rows"
    );
    let survivors: BTreeMap<String, (i64, i64)> = spark_lineage(spark_before)
        .into_iter()
        .filter(|(k, _)| expected.contains_key(k))
        .collect();
    assert_eq!(
        spark_lineage(spark_after),
        survivors,
        "row ids through Spark"
    );
    assert_eq!(
        lineage(&ws.warehouse, table, "event_id").await,
        survivors,
        "row ids through lethe"
    );
    assert_eq!(
        files_after["dangling_deletion_vectors"],
        serde_json::json!([])
    );
    assert_eq!(
        files_after["dangling_delete_targets"],
        serde_json::json!([])
    );
    assert_eq!(
        files_after["deletion_vectors"], 1,
        "the vector on the file without the subject stays: {files_after}"
    );
    assert_eq!(
        files_after["puffin_files"][0]["path"], files_before["puffin_files"][0]["path"],
        "the Puffin file stays: it still holds a live vector"
    );
    assert_eq!(files_after["puffin_files"][0]["vectors"], 1);
    let py = pyiceberg(&dir, "read_v3.py", &[table], None)[table].clone();
    let py_rows: BTreeMap<String, serde_json::Value> = rows_of(&py)
        .into_iter()
        .map(|r| (r["event_id"].as_str().unwrap().to_string(), r))
        .collect();
    assert_eq!(py_rows, expected, "PyIceberg reads the expected rows");
    assert_eq!(py["dangling_deletion_vectors"], serde_json::json!([]));
}
