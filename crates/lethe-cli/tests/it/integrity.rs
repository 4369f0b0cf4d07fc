//! Issue 44, integrity: what lethe deletes is exactly what it may delete, against real servers
//! (SeaweedFS's S3 and Iceberg REST catalog, started by `scripts/test.sh`; these tests fail,
//! never skip, when they are missing).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use iceberg::TableCreation;
use lethe::config::{CatalogConfig, Config, StorageConfig};
use lethe::workspace::Workspace;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::clock::SystemClock;
use lethe_iceberg::ops::history::purge_history;
use lethe_iceberg::ops::rewrite::{RowRewrite, count_rows, rewrite_rows};
use lethe_iceberg::ops::sweep::{PurgeScope, TableLocations, purge_versions, sweep};
use lethe_iceberg::store::StoredVersion;

use crate::production::{env, events_table, person, py, suffix};

/// A workspace on a SQLite catalog over a fresh versioned bucket of the test SeaweedFS.
fn versioned_workspace(dir: &Path, bucket: &str) -> Workspace {
    let made = py(
        "bucket_scan.py",
        &["--create-bucket", bucket, "--versioned"],
        None,
    );
    assert_eq!(made["versioning"], "Enabled");
    let catalog = CatalogConfig {
        kind: "sql".into(),
        name: "lethe".into(),
        uri: format!("sqlite:///{}", dir.join("catalog.db").display()),
        warehouse: format!("s3://{bucket}/wh"),
        ..Default::default()
    };
    let storage = StorageConfig {
        endpoint: Some(env("LETHE_S3_ENDPOINT")),
        path_style: Some(true),
        ..Default::default()
    };
    let file = dir.join("lethe.toml");
    std::fs::write(&file, Config::render_with(&catalog, &storage, &[])).unwrap();
    Workspace::open(&Config::load(&file).unwrap()).unwrap()
}

/// Every version under `prefix`, by location.
fn versions(ws: &Workspace, prefix: &str) -> BTreeMap<String, Vec<StoredVersion>> {
    let mut out: BTreeMap<String, Vec<StoredVersion>> = BTreeMap::new();
    for v in ws.warehouse.store.list_versions(prefix).unwrap() {
        let v = v.unwrap();
        out.entry(v.location.clone()).or_default().push(v);
    }
    out
}

/// An object written, then deleted: a noncurrent version holding `bytes` and a delete marker.
/// Returns the noncurrent version's id.
fn written_and_deleted(ws: &Workspace, location: &str, bytes: &[u8]) -> String {
    let store = &ws.warehouse.store;
    store.write_new(location, bytes).unwrap();
    let version = store
        .current_version(location)
        .unwrap()
        .expect("a version id");
    store.delete(location).unwrap();
    version
}

/// Regression (issue 44 item 3): `purge_versions` deleted every noncurrent version under a
/// changed table's location — another writer's object under it, and the versions of a table
/// nested inside it — and left the delete markers. Now it deletes the versions of the objects
/// the erasure removed (then their markers: 0 versions left) and the versions named as holding
/// a trace, and nothing else.
#[tokio::test(flavor = "multi_thread")]
async fn purging_versions_removes_what_the_erasure_removed_and_nothing_of_others() {
    let tmp = tempfile::tempdir().unwrap();
    let bucket = format!("lethe-p{}", suffix());
    let ws = versioned_workspace(tmp.path(), &bucket);
    let wh = &ws.warehouse;
    let store = &wh.store;
    let a = events_table(&ws, "pv", 0..40).await;
    let a_loc = wh.load(&a).await.unwrap().location().to_string();
    // A table whose location is inside A's, with a noncurrent version of its own.
    let b = TableName::parse("pv.nested").unwrap();
    let schema = wh.load(&a).await.unwrap().metadata.current_schema().clone();
    wh.catalog
        .create_table(
            &b,
            TableCreation::builder()
                .name("nested".into())
                .location(format!("{a_loc}/nested"))
                .schema((*schema).clone())
                .build(),
            store.as_ref(),
        )
        .await
        .unwrap();
    let b_object = format!("{a_loc}/nested/data/left-by-b.parquet");
    written_and_deleted(&ws, &b_object, b"b's bytes");
    // Another writer's object under A's location, deleted before the erasure.
    let other = format!("{a_loc}/backup/other.bin");
    written_and_deleted(&ws, &other, b"someone else's bytes");
    // An object deleted before the erasure whose version holds a trace.
    let holding = format!("{a_loc}/data/old-holding.parquet");
    let holding_version = written_and_deleted(&ws, &holding, b"the subject's old bytes");

    // The erasure: delete the person's rows, purge the history, sweep.
    // S3 gives times to the second: the erasure starts in a later second than those deletes.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let since = chrono::Utc::now();
    let r = rewrite_rows(wh, &a, &RowRewrite::delete(person()))
        .await
        .unwrap();
    assert!(!r.files_rewritten.is_empty());
    let history = purge_history(
        wh,
        &a,
        lethe_iceberg::ops::expire::Cutoff::Every,
        BTreeMap::new(),
        &SystemClock,
    )
    .await
    .unwrap();
    assert!(history.expire.files_deleted > 0);
    sweep(wh, &a, chrono::Duration::zero(), false, &SystemClock)
        .await
        .unwrap();
    // B's second object is deleted while the erasure runs: still not A's to purge.
    let b_late = format!("{a_loc}/nested/data/late.parquet");
    written_and_deleted(&ws, &b_late, b"b's later bytes");

    let before = versions(&ws, &format!("{a_loc}/"));
    let removed: Vec<&String> = before
        .iter()
        .filter(|(l, vs)| {
            !l.contains("/nested/")
                && l.as_str() != other
                && l.as_str() != holding
                && vs.iter().all(|v| !v.is_current() || v.delete_marker)
        })
        .map(|(l, _)| l)
        .collect();
    assert!(
        removed.len() >= 3,
        "the erasure removed a data file, a manifest list and metadata: {removed:?}"
    );
    let scope = PurgeScope {
        removed_since: since,
        holding: [(store.normalize(&holding).unwrap(), holding_version)].into(),
    };
    let tables = TableLocations::load(wh).await.unwrap();
    let report = purge_versions(wh, &a, &scope, &tables).await.unwrap();
    let after = versions(&ws, &format!("{a_loc}/"));
    // What the erasure removed, and the holding object: not a version, not a marker left.
    for l in removed.iter().copied().chain([&holding]) {
        assert!(
            !after.contains_key(l),
            "{l} keeps {:?}",
            after.get(l).map(|v| v.len())
        );
    }
    assert!(report.delete_markers_removed >= removed.len(), "{report:?}");
    // Every object the table references is still current.
    for (l, vs) in after.iter().filter(|(l, _)| !l.contains("/nested/")) {
        if l.as_str() == other {
            continue;
        }
        assert!(
            vs.iter().all(|v| v.is_current() && !v.delete_marker),
            "{l}: {vs:?}"
        );
    }
    // Another writer's object and the nested table's: untouched, versions and markers.
    for l in [&other, &b_object, &b_late] {
        let vs = after
            .get(l)
            .unwrap_or_else(|| panic!("{l} lost every version: {:#?} {report:?}", after.keys()));
        assert_eq!(vs.len(), 2, "{l}: {vs:?}");
        assert!(
            vs.iter().any(|v| v.delete_marker) && vs.iter().any(|v| !v.delete_marker),
            "{l}: {vs:?}"
        );
    }
    assert_eq!(report.versions_left, 3, "{report:?}");
    // The table reads as before the purge.
    let t = wh.load(&a).await.unwrap();
    assert_eq!(count_rows(wh, &t, &person()).await.unwrap(), (0, 30));
    let counts: HashMap<String, usize> = after.iter().map(|(l, v)| (l.clone(), v.len())).collect();
    for f in wh.current_files(&t).await.unwrap() {
        let l = store.normalize(f.entry.data_file.file_path()).unwrap();
        assert_eq!(counts.get(&l), Some(&1), "{l}");
    }
}

/// A workspace on the test REST catalog reached at `uri` (a proxy in front of it), OAuth2
/// client credentials from LETHE_REST_CREDENTIAL.
fn rest_workspace_at(dir: &Path, uri: &str) -> Workspace {
    std::fs::create_dir_all(dir).unwrap();
    let catalog = CatalogConfig {
        kind: "rest".into(),
        name: "lethe".into(),
        uri: uri.into(),
        warehouse: env("LETHE_REST_WAREHOUSE"),
        ..Default::default()
    };
    let storage = StorageConfig {
        endpoint: Some(env("LETHE_S3_ENDPOINT")),
        path_style: Some(true),
        ..Default::default()
    };
    let file = dir.join("lethe.toml");
    std::fs::write(&file, Config::render_with(&catalog, &storage, &[])).unwrap();
    Workspace::open(&Config::load(&file).unwrap()).unwrap()
}

/// Regression (issue 44 item 1): the REST catalog committed, but its answer (a 200) had a body
/// lethe couldn't read; the commit path took that for "certainly not applied" and deleted the
/// data files, manifests and manifest list the table now pointed at. Through a proxy that
/// passes SeaweedFS's real 200 on with a body that is not JSON: lethe reloads the table to
/// learn the outcome, finds its snapshot, deletes nothing, and PyIceberg reads the table with
/// every file it points at present.
#[tokio::test(flavor = "multi_thread")]
async fn a_rest_commit_answered_with_an_unreadable_body_keeps_its_files() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let armed = Arc::new(AtomicBool::new(false));
    let a2 = armed.clone();
    let rewrite: crate::proxy::Rewrite = Arc::new(move |method, path, status, _body| {
        (a2.load(Ordering::SeqCst)
            && method == "POST"
            && path.ends_with("/tables/events")
            && (200..300).contains(&status))
        .then(|| bytes::Bytes::from_static(b"<html><body>200 OK</body></html>"))
    });
    let proxy = crate::proxy::start(&env("LETHE_REST_URI"), rewrite).await;
    let tmp = tempfile::tempdir().unwrap();
    let ws = rest_workspace_at(tmp.path(), &proxy.uri);
    let wh = &ws.warehouse;
    let name = events_table(&ws, &format!("x{}", suffix()), 0..40).await;
    let seen = proxy.log.lock().unwrap().len();
    assert!(seen > 0, "lethe went through the proxy");
    armed.store(true, Ordering::SeqCst);
    let r = rewrite_rows(wh, &name, &RowRewrite::delete(person()))
        .await
        .expect("the commit landed: lethe must find that out, not fail");
    armed.store(false, Ordering::SeqCst);
    assert_eq!(r.attempts, 1, "the reload showed the commit landed");
    // The commit's 200 went through, then lethe reloaded the table to learn the outcome.
    let log = proxy.log.lock().unwrap()[seen..].to_vec();
    let table_path = format!("/tables/{}", name.name);
    let post = log
        .iter()
        .position(|f| f.method == "POST" && f.path.ends_with(&table_path) && f.status == 200)
        .unwrap_or_else(|| panic!("no commit went through: {log:?}"));
    assert!(
        log[post + 1..]
            .iter()
            .any(|f| f.method == "GET" && f.path.ends_with(&table_path)),
        "lethe did not reload the table after the unreadable answer: {log:?}"
    );
    // The table points at files that are all there: lethe's store and PyIceberg agree.
    let t = wh.load(&name).await.unwrap();
    assert_eq!(
        t.current_snapshot().map(|s| s.snapshot_id()),
        r.snapshot_id,
        "the snapshot lethe committed is current"
    );
    let snapshot = t.current_snapshot().unwrap();
    assert!(wh.store.exists(snapshot.manifest_list()).unwrap());
    for f in wh.current_files(&t).await.unwrap() {
        let p = f.entry.data_file.file_path();
        assert!(wh.store.exists(p).unwrap(), "{p} was deleted");
    }
    let read = py(
        "prod_catalog.py",
        &[
            "rest",
            "lethe",
            "read",
            &name.to_string(),
            &format!("{name}?person_id={}", crate::production::LEARNER),
        ],
        None,
    );
    assert_eq!(read[name.to_string()]["rows"], 30, "{read}");
    assert_eq!(
        read[format!("{name}?person_id={}", crate::production::LEARNER)]["rows"],
        0,
        "{read}"
    );
}
