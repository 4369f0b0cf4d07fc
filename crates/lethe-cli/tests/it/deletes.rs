//! Merge-on-read delete files (`lethe_iceberg::deletes`) against a model of the spec: random
//! position and equality deletes, rewrites that purge what they hide, cleanup of delete files,
//! and deletion vectors refused. (Moved here from the crate's unit tests: they build their
//! tables with the fixtures of `lethe-demo`.)

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow::array::{AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema};
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, FormatVersion, NestedField, PrimitiveType,
    Schema, Transform, Type, UnboundPartitionSpec,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use lethe::workspace::Workspace;
use lethe_demo::fixtures::{
    GovernanceFiles, delete_by_equality, delete_by_position, init_workspace,
};
use lethe_iceberg::Error;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::deletes::*;
use lethe_iceberg::ops::rewrite::{RowRewrite, append, count_rows, rewrite_rows, select_rows};
use lethe_iceberg::predicate::{Predicate, Value};
use lethe_iceberg::read::{read_data_file, read_raw};
use lethe_iceberg::table::TrackedFile;
use lethe_iceberg::writer::WriteOptions;

fn schema() -> Schema {
    Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String)).into(),
        ])
        .build()
        .unwrap()
}

fn batch(rows: &[(i64, String)]) -> RecordBatch {
    let s = Arc::new(ArrowSchema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]));
    RecordBatch::try_new(
        s,
        vec![
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                rows.iter().map(|r| Some(r.1.clone())).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

fn keys(ids: &[i64]) -> RecordBatch {
    let s = Arc::new(ArrowSchema::new(vec![Field::new(
        "id",
        DataType::Int64,
        false,
    )]));
    RecordBatch::try_new(s, vec![Arc::new(Int64Array::from(ids.to_vec()))]).unwrap()
}

async fn workspace(dir: &std::path::Path) -> Workspace {
    init_workspace(dir, GovernanceFiles::default()).unwrap()
}

async fn table(ws: &Workspace, partition: Option<UnboundPartitionSpec>) -> TableName {
    let name = TableName::parse("t.rows").unwrap();
    ws.warehouse
        .create_table(
            &name,
            schema(),
            partition,
            None,
            Default::default(),
            FormatVersion::V2,
        )
        .await
        .unwrap();
    name
}

fn ids_of(batches: &[RecordBatch]) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    for b in batches {
        let id = b.column(0).as_primitive::<arrow::datatypes::Int64Type>();
        let name = b.column(1).as_string::<i32>();
        for i in 0..b.num_rows() {
            out.push((id.value(i), name.value(i).to_string()));
        }
    }
    out.sort();
    out
}

/// The model of the table: every row ever written, with its data sequence number.
#[derive(Debug, Clone)]
struct ModelRow {
    id: i64,
    name: String,
    seq: i64,
    dead: bool,
}

fn live(model: &[ModelRow]) -> Vec<(i64, String)> {
    let mut v: Vec<_> = model
        .iter()
        .filter(|r| !r.dead)
        .map(|r| (r.id, r.name.clone()))
        .collect();
    v.sort();
    v
}

/// Every stored row (dead ones included) and the delete files' references.
async fn physical(ws: &Workspace, name: &TableName) -> (Vec<i64>, Vec<TrackedFile>) {
    let wh = &ws.warehouse;
    let t = wh.load(name).await.unwrap();
    let files = wh.current_files(&t).await.unwrap();
    let mut ids = Vec::new();
    for f in files.iter().filter(|f| f.is_data()) {
        for b in
            read_data_file(wh.store.as_ref(), f.entry.data_file.file_path(), &schema()).unwrap()
        {
            ids.extend(
                b.column(0)
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .values()
                    .iter(),
            );
        }
    }
    (ids, files.into_iter().filter(|f| !f.is_data()).collect())
}

/// Position delete rows naming a path that is not a live data file.
async fn dangling(ws: &Workspace, name: &TableName) -> usize {
    let wh = &ws.warehouse;
    let t = wh.load(name).await.unwrap();
    let files = wh.current_files(&t).await.unwrap();
    let live: BTreeSet<String> = files
        .iter()
        .filter(|f| f.is_data())
        .map(|f| wh.store.normalize(f.entry.data_file.file_path()).unwrap())
        .collect();
    let mut n = 0;
    for f in files
        .iter()
        .filter(|f| f.entry.data_file.content_type() == DataContentType::PositionDeletes)
    {
        let (s, batches) = read_raw(wh.store.as_ref(), f.entry.data_file.file_path()).unwrap();
        let i = column_by_id(&s, FILE_PATH_FIELD_ID).unwrap();
        for b in batches {
            let p = b.column(i).as_string::<i32>();
            for r in 0..b.num_rows() {
                if !live.contains(&wh.store.normalize(p.value(r)).unwrap()) {
                    n += 1;
                }
            }
        }
    }
    n
}

/// Keys held by equality delete files.
async fn equality_keys(ws: &Workspace, name: &TableName) -> Vec<i64> {
    let wh = &ws.warehouse;
    let t = wh.load(name).await.unwrap();
    let mut out = Vec::new();
    for f in wh.current_files(&t).await.unwrap() {
        if f.entry.data_file.content_type() == DataContentType::EqualityDeletes {
            let (_, batches) = read_raw(wh.store.as_ref(), f.entry.data_file.file_path()).unwrap();
            for b in batches {
                out.extend(
                    b.column(0)
                        .as_primitive::<arrow::datatypes::Int64Type>()
                        .values()
                        .iter(),
                );
            }
        }
    }
    out.sort();
    out
}

async fn check(ws: &Workspace, name: &TableName, model: &[ModelRow], seed: u64, step: &str) {
    let wh = &ws.warehouse;
    let t = wh.load(name).await.unwrap();
    let all = select_rows(wh, &t, &Predicate::True).await.unwrap();
    assert_eq!(ids_of(&all), live(model), "seed {seed}, {step}: live rows");
    let (matched, total) = count_rows(wh, &t, &Predicate::True).await.unwrap();
    assert_eq!(
        total as usize,
        live(model).len(),
        "seed {seed}, {step}: total"
    );
    assert_eq!(matched, total, "seed {seed}, {step}");
    // `lethe tables` counts the live rows too (issue 44 item 9: it counted hidden ones).
    let listed = lethe_iceberg::inspect::tables(wh).await.unwrap();
    let row = listed.iter().find(|s| s.table == name.to_string()).unwrap();
    assert_eq!(
        row.rows,
        Some(live(model).len() as u64),
        "seed {seed}, {step}: lethe tables"
    );
    let some = Predicate::is_in("id", vec![Value::Int(3), Value::Int(4)]);
    let (m, _) = count_rows(wh, &t, &some).await.unwrap();
    let expect = live(model).iter().filter(|r| r.0 == 3 || r.0 == 4).count();
    assert_eq!(m as usize, expect, "seed {seed}, {step}: count of ids 3, 4");
}

/// Random appends, position deletes and equality deletes against a model of the spec's
/// rules; then a copy-on-write delete must leave exactly the model's rows, no stored row of
/// the deleted ids (live or hidden), no position delete naming a removed file and no
/// equality delete holding a deleted key; a rewrite of everything leaves no delete file.
#[tokio::test(flavor = "multi_thread")]
async fn merge_on_read_matches_the_spec_model() {
    let seed: u64 = std::env::var("LETHE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    eprintln!("seed: {seed} (set LETHE_TEST_SEED to replay)");
    for (round, partitioned) in [(0u64, false), (1, true), (2, false)] {
        let seed = seed.wrapping_add(round);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let ws = workspace(dir.path()).await;
        let spec = partitioned.then(|| {
            UnboundPartitionSpec::builder()
                .add_partition_field(1, "id_bucket", Transform::Bucket(3))
                .unwrap()
                .build()
        });
        let name = table(&ws, spec).await;
        let wh = &ws.warehouse;
        let mut model: Vec<ModelRow> = Vec::new();
        let mut seq = 0i64;
        let mut counter = 0;
        for step in 0..12 {
            let op = if step < 2 { 0 } else { rng.random_range(0..4) };
            match op {
                0 => {
                    let n = rng.random_range(3..12);
                    let rows: Vec<(i64, String)> = (0..n)
                        .map(|_| {
                            counter += 1;
                            (rng.random_range(0..10), format!("r{counter}"))
                        })
                        .collect();
                    seq += 1;
                    append(
                        wh,
                        &name,
                        &[batch(&rows)],
                        BTreeMap::new(),
                        WriteOptions::default(),
                    )
                    .await
                    .unwrap();
                    model.extend(rows.into_iter().map(|(id, name)| ModelRow {
                        id,
                        name,
                        seq,
                        dead: false,
                    }));
                }
                1 => {
                    let a = rng.random_range(0..10);
                    let p = Predicate::is_in("id", vec![Value::Int(a)]).and(Predicate::cmp(
                        "name",
                        lethe_iceberg::predicate::CmpOp::GtEq,
                        Value::Str(format!("r{}", rng.random_range(0..9))),
                    ));
                    let store = rng.random_bool(0.5);
                    let s = delete_by_position(wh, &name, &p, store).await.unwrap();
                    if s.is_some() {
                        seq += 1;
                    }
                    // Apply the same predicate to the model.
                    let Predicate::And(parts) = &p else {
                        unreachable!()
                    };
                    let Predicate::Cmp {
                        value: Value::Str(min),
                        ..
                    } = &parts[1]
                    else {
                        unreachable!()
                    };
                    for r in model.iter_mut() {
                        if !r.dead && r.id == a && r.name.as_str() >= min.as_str() {
                            r.dead = true;
                        }
                    }
                }
                3 if !partitioned => {
                    // Flink's upsert: new rows and the equality delete of their keys in
                    // one snapshot; the delete must spare the new rows.
                    let rows: Vec<(i64, String)> = (0..rng.random_range(1..4))
                        .map(|_| {
                            counter += 1;
                            (rng.random_range(0..10), format!("r{counter}"))
                        })
                        .collect();
                    let ks: Vec<i64> = rows.iter().map(|r| r.0).collect();
                    lethe_demo::fixtures::upsert(
                        wh,
                        &name,
                        &["id"],
                        &keys(&ks),
                        Some(&batch(&rows)),
                    )
                    .await
                    .unwrap();
                    seq += 1;
                    for r in model.iter_mut() {
                        if r.seq < seq && ks.contains(&r.id) {
                            r.dead = true;
                        }
                    }
                    model.extend(rows.into_iter().map(|(id, name)| ModelRow {
                        id,
                        name,
                        seq,
                        dead: false,
                    }));
                }
                _ if !partitioned => {
                    let ks: Vec<i64> = (0..rng.random_range(1..3))
                        .map(|_| rng.random_range(0..10))
                        .collect();
                    delete_by_equality(wh, &name, &["id"], &keys(&ks))
                        .await
                        .unwrap();
                    seq += 1;
                    for r in model.iter_mut() {
                        if r.seq < seq && ks.contains(&r.id) {
                            r.dead = true;
                        }
                    }
                }
                _ => {}
            }
            check(&ws, &name, &model, seed, &format!("step {step}")).await;
        }
        // The erasure: ids 3 and 4 go, live or hidden.
        let gone = [3i64, 4];
        let p = Predicate::is_in("id", gone.iter().map(|i| Value::Int(*i)).collect());
        let r = rewrite_rows(wh, &name, &RowRewrite::delete(p))
            .await
            .unwrap();
        let expect_matched = live(&model).iter().filter(|r| gone.contains(&r.0)).count();
        assert_eq!(r.rows_matched as usize, expect_matched, "seed {seed}");
        for m in model.iter_mut() {
            if gone.contains(&m.id) {
                m.dead = true;
            }
        }
        check(&ws, &name, &model, seed, "after the delete").await;
        let (stored, _) = physical(&ws, &name).await;
        assert!(
            !stored.iter().any(|i| gone.contains(i)),
            "seed {seed}: a deleted id is still stored in a data file"
        );
        assert_eq!(
            dangling(&ws, &name).await,
            0,
            "seed {seed}: dangling position deletes"
        );
        assert!(
            !equality_keys(&ws, &name)
                .await
                .iter()
                .any(|k| gone.contains(k)),
            "seed {seed}: an equality delete file still holds a deleted key"
        );
        // Compaction: every data file rewritten, no delete file left.
        rewrite_rows(wh, &name, &RowRewrite::rewrite_all())
            .await
            .unwrap();
        check(&ws, &name, &model, seed, "after rewrite_all").await;
        let (stored, deletes) = physical(&ws, &name).await;
        assert!(
            deletes.is_empty(),
            "seed {seed}: delete files left after a full rewrite"
        );
        assert_eq!(
            stored.len(),
            live(&model).len(),
            "seed {seed}: stored rows after compaction"
        );
    }
}

/// A rewritten equality delete file keeps its data sequence number: a key it still holds
/// must not delete a row appended after it.
#[tokio::test(flavor = "multi_thread")]
async fn rewritten_equality_deletes_keep_their_sequence_number() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path()).await;
    let name = table(&ws, None).await;
    let wh = &ws.warehouse;
    let rows = |v: &[(i64, &str)]| {
        batch(
            &v.iter()
                .map(|(i, s)| (*i, s.to_string()))
                .collect::<Vec<_>>(),
        )
    };
    append(
        wh,
        &name,
        &[rows(&[(5, "a"), (8, "c")])],
        BTreeMap::new(),
        WriteOptions::default(),
    )
    .await
    .unwrap();
    // A file the erasure doesn't touch: the equality delete still applies to it.
    append(
        wh,
        &name,
        &[rows(&[(7, "b"), (10, "e")])],
        BTreeMap::new(),
        WriteOptions::default(),
    )
    .await
    .unwrap();
    delete_by_equality(wh, &name, &["id"], &keys(&[5, 7]))
        .await
        .unwrap();
    // Key 7 comes back after the delete (a later upsert).
    append(
        wh,
        &name,
        &[rows(&[(7, "b2"), (9, "d")])],
        BTreeMap::new(),
        WriteOptions::default(),
    )
    .await
    .unwrap();
    let t = wh.load(&name).await.unwrap();
    let before: Vec<_> = wh
        .current_files(&t)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| !f.is_data())
        .collect();
    assert_eq!(before.len(), 1);
    let old_seq = data_sequence_number(&before[0]);
    // Erase key 5: nothing live holds it, but the delete file does.
    let r = rewrite_rows(
        wh,
        &name,
        &RowRewrite::delete(Predicate::is_in("id", vec![Value::Int(5)])),
    )
    .await
    .unwrap();
    assert_eq!(r.rows_matched, 0);
    assert_eq!(r.rows_purged, 1, "the hidden row of key 5 is purged");
    assert_eq!(r.delete_files_rewritten.len(), 1, "{r:?}");
    let t = wh.load(&name).await.unwrap();
    let after: Vec<_> = wh
        .current_files(&t)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| !f.is_data())
        .collect();
    assert_eq!(after.len(), 1);
    assert_eq!(data_sequence_number(&after[0]), old_seq);
    assert_eq!(equality_keys(&ws, &name).await, vec![7]);
    let all = select_rows(wh, &t, &Predicate::True).await.unwrap();
    assert_eq!(
        ids_of(&all),
        vec![
            (7, "b2".to_string()),
            (8, "c".to_string()),
            (9, "d".to_string()),
            (10, "e".to_string())
        ]
    );
}

/// Deletion vectors are read (see `v3.rs`); a delete file in another format (Avro, ORC) is
/// refused by name.
#[tokio::test(flavor = "multi_thread")]
async fn delete_files_neither_parquet_nor_vectors_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path()).await;
    let name = table(&ws, None).await;
    let t = ws.warehouse.load(&name).await.unwrap();
    let entry = |b: &mut DataFileBuilder| TrackedFile {
        manifest: "m".into(),
        entry: iceberg::spec::ManifestEntry::builder()
            .status(iceberg::spec::ManifestStatus::Added)
            .snapshot_id(1)
            .sequence_number(1)
            .file_sequence_number(1)
            .data_file(b.build().unwrap())
            .build(),
    };
    let mut dv = DataFileBuilder::default();
    dv.content(DataContentType::PositionDeletes)
        .file_path("file:///x/dv.puffin".to_string())
        .file_format(DataFileFormat::Puffin)
        .record_count(1)
        .file_size_in_bytes(10)
        .referenced_data_file(Some("file:///x/d.parquet".to_string()))
        .content_offset(Some(4))
        .content_size_in_bytes(Some(6));
    check_supported(&t, &[entry(&mut dv)]).unwrap();
    let mut avro = DataFileBuilder::default();
    avro.content(DataContentType::PositionDeletes)
        .file_path("file:///x/deletes.avro".to_string())
        .file_format(DataFileFormat::Avro)
        .record_count(1)
        .file_size_in_bytes(10);
    let e = check_supported(&t, &[entry(&mut avro)]).unwrap_err();
    assert!(
        matches!(&e, Error::Unsupported { detail, .. } if detail.contains("deletes.avro")),
        "{e}"
    );
}
