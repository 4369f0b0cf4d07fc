//! Issue 5: ERASE — the whole cleanup, crash safety, sweep safety, batches, bad input.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use chrono::Duration;
use lethe::erasure::case::RequestSpec;
use lethe::erasure::erase::erase;
use lethe::workspace::Workspace;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::clock::FixedClock;
use lethe_iceberg::ops::rewrite::{RowRewrite, append, count_rows, rewrite_rows, select_rows};
use lethe_iceberg::ops::sweep::{referenced, sweep};
use lethe_iceberg::predicate::{Predicate, Value};
use rand::{Rng, SeedableRng};

use crate::common::{Demo, erase_opts, lethe_in, pyiceberg, seed};

const PLAN_TABLES: &[&str] = &[
    "billing.payments",
    "crm.learners",
    "learning.enrollments",
    "learning.events",
    "learning.reviews",
    "support.tickets",
    "ai.review_corpus",
    "analytics.course_performance",
    "analytics.learner_activity",
    "marketing.audience",
];

fn request(id: i64, request: &str) -> RequestSpec {
    RequestSpec {
        request: request.into(),
        subject: "learner".into(),
        id: id.to_string(),
    }
}

async fn rows_of_learner(ws: &Workspace, table: &str, id: i64) -> u64 {
    let t = ws.warehouse.load_str(table).await.unwrap();
    if t.metadata
        .current_schema()
        .field_by_name("learner_id")
        .is_none()
    {
        return 0;
    }
    count_rows(
        &ws.warehouse,
        &t,
        &Predicate::eq("learner_id", Value::Int(id)),
    )
    .await
    .unwrap()
    .0
}

async fn unreferenced(ws: &Workspace) -> usize {
    let mut n = 0;
    for t in ws.warehouse.tables().await.unwrap() {
        let r = sweep(&ws.warehouse, &t, Duration::zero(), true, ws.clock.as_ref())
            .await
            .unwrap();
        n += r.unreferenced_count;
    }
    n
}

/// Every table's rows, as sorted debug lines (for comparing two warehouses).
pub(crate) async fn contents(ws: &Workspace) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for name in ws.warehouse.tables().await.unwrap() {
        out.insert(name.to_string(), table_rows(ws, &name).await);
    }
    out
}

/// One table's rows, as sorted debug lines.
/// Each row of `batches` as one `|`-joined line of its displayed cells, sorted.
fn sorted_lines(batches: &[arrow::array::RecordBatch]) -> Vec<String> {
    let mut rows = Vec::new();
    for b in batches {
        for i in 0..b.num_rows() {
            let cells: Vec<String> = b
                .columns()
                .iter()
                .map(|c| arrow::util::display::array_value_to_string(c, i).unwrap())
                .collect();
            rows.push(cells.join("|"));
        }
    }
    rows.sort();
    rows
}

async fn table_rows(ws: &Workspace, name: &TableName) -> Vec<String> {
    let t = ws.warehouse.load(name).await.unwrap();
    let batches = select_rows(&ws.warehouse, &t, &Predicate::True)
        .await
        .unwrap();
    sorted_lines(&batches)
}

#[tokio::test(flavor = "multi_thread")]
async fn with_generated_properties_the_erasure_leaves_nothing_behind() {
    let demo = Demo::new().await;
    let ws = &demo.ws;
    demo.lethe_ok(&["properties", "apply"], 0);
    let report = erase(ws, &[request(3590, "erasure-0001")], &erase_opts(), &|_| {})
        .await
        .unwrap();
    assert!(report.journal.finished_at.is_some());
    for t in PLAN_TABLES.iter().filter(|t| **t != "billing.payments") {
        assert_eq!(rows_of_learner(ws, t, 3590).await, 0, "{t}");
    }
    // The exception keeps the learner's payments, without card numbers.
    let t = ws.warehouse.load_str("billing.payments").await.unwrap();
    let kept = select_rows(
        &ws.warehouse,
        &t,
        &Predicate::eq("learner_id", Value::Int(3590)),
    )
    .await
    .unwrap();
    assert_eq!(kept.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
    assert!(
        kept.iter()
            .all(|b| b.column_by_name("card_number").unwrap().null_count() == b.num_rows())
    );
    // No snapshot from before, no unreferenced file, no metadata log.
    for name in PLAN_TABLES {
        let t = ws.warehouse.load_str(name).await.unwrap();
        assert_eq!(
            t.metadata.snapshots().len(),
            1,
            "{name} keeps only its current snapshot"
        );
        assert!(
            t.metadata.metadata_log().is_empty(),
            "{name}'s metadata log was trimmed"
        );
    }
    assert_eq!(unreferenced(ws).await, 0);
    // No file, manifest bound included, holds the learner.
    let case = lethe::erasure::case::read_case(ws, "erasure-0001").unwrap();
    let proof = lethe::erasure::prove::prove(ws, &[case], &|_| {})
        .await
        .unwrap();
    assert!(proof.is_clean(), "{:#?}", proof.hits);
    assert!(proof.files_read > 50);
    // Every commit recorded only the request.
    let learners = ws.warehouse.load_str("crm.learners").await.unwrap();
    let s = &learners
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties;
    assert_eq!(s["erasure-request"], "erasure-0001");
    // PyIceberg reads every table, with the expected rows.
    let py = pyiceberg(
        &demo.dir,
        "read_tables.py",
        &[
            "crm.learners",
            "crm.learners?learner_id=3590",
            "billing.payments?learner_id=3590",
            "learning.events",
        ],
        None,
    );
    assert_eq!(py["crm.learners"]["rows"], 4999);
    assert_eq!(py["crm.learners?learner_id=3590"]["rows"], 0);
    assert_eq!(py["billing.payments?learner_id=3590"]["rows"], 2);
    let events = count_rows(
        &ws.warehouse,
        &ws.warehouse.load_str("learning.events").await.unwrap(),
        &Predicate::True,
    )
    .await
    .unwrap()
    .0;
    assert_eq!(py["learning.events"]["rows"], events);
    let all = pyiceberg(&demo.dir, "read_tables.py", &[], None);
    assert_eq!(
        all.as_object().unwrap().len(),
        13,
        "PyIceberg loads every table"
    );
    // The finished journal keeps no ID or value of the learner.
    let journal =
        std::fs::read_to_string(demo.dir.join("state/erasures/erasure-0001.json")).unwrap();
    assert!(
        !journal.contains("\"3590\""),
        "the finished journal holds the learner's ID"
    );
    for v in &lethe::erasure::case::read_case(ws, "erasure-0001")
        .unwrap()
        .values
    {
        assert!(
            !journal.contains(&v.value),
            "the finished journal holds a {}",
            v.kind
        );
    }
    // Rerunning the finished request changes nothing and says so; the same request ID for
    // another learner is refused.
    let before: Vec<String> = futures_locations(ws).await;
    let again = demo.lethe_ok(
        &[
            "erase",
            "--subject",
            "learner=3590",
            "--request",
            "erasure-0001",
        ],
        0,
    );
    assert!(again.contains("already complete"), "{again}");
    assert!(
        demo.lethe_ok(&["erase", "--resume", "erasure-0001"], 0)
            .contains("already complete")
    );
    let out = demo.lethe(&[
        "erase",
        "--subject",
        "learner=3591",
        "--request",
        "erasure-0001",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("was used for another subject"));
    assert_eq!(before, futures_locations(ws).await);
}

async fn futures_locations(ws: &Workspace) -> Vec<String> {
    let mut v = Vec::new();
    for t in ws.warehouse.tables().await.unwrap() {
        v.push(ws.warehouse.load(&t).await.unwrap().metadata_location);
    }
    v
}

/// With default statistics, the learner whose email is crm.learners' largest value sits in a
/// manifest's upper bound; the erasure's manifest rewrite takes it away.
#[tokio::test(flavor = "multi_thread")]
async fn default_statistics_the_largest_email_leaves_no_manifest_either() {
    let demo = Demo::new().await;
    let ws = &demo.ws;
    let t = ws.warehouse.load_str("crm.learners").await.unwrap();
    let rows = select_rows(&ws.warehouse, &t, &Predicate::True)
        .await
        .unwrap();
    let mut best: Option<(String, i64)> = None;
    for b in &rows {
        let e =
            arrow::array::AsArray::as_string::<i32>(b.column_by_name("email").unwrap().as_ref());
        let id = arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>(
            b.column_by_name("learner_id").unwrap().as_ref(),
        );
        for i in 0..b.num_rows() {
            if best.as_ref().is_none_or(|(m, _)| e.value(i) > m.as_str()) {
                best = Some((e.value(i).to_string(), id.value(i)));
            }
        }
    }
    let (email, learner) = best.unwrap();
    // Before: its 15-character prefix is in a manifest bound.
    let before = lethe::erasure::erase::prepare(
        ws,
        &ws.governance().unwrap(),
        &[request(learner, "probe")],
        None,
        &|_| {},
    )
    .await
    .unwrap();
    let scan = lethe::erasure::prove::prove(ws, &before.cases, &|_| {})
        .await
        .unwrap();
    assert!(
        scan.hits
            .iter()
            .any(|h| h.place == "ManifestBound" && h.trace == "value email"),
        "the largest email ({}) is a bound before",
        email.len()
    );
    erase(
        ws,
        &[request(learner, "erasure-largest")],
        &erase_opts(),
        &|_| {},
    )
    .await
    .unwrap();
    let case = lethe::erasure::case::read_case(ws, "erasure-largest").unwrap();
    let proof = lethe::erasure::prove::prove(ws, &[case], &|_| {})
        .await
        .unwrap();
    assert!(proof.is_clean(), "{:#?}", proof.hits);
}

/// The erasure stopped after each durable step in turn (a child process panicking at the
/// failpoint), then run again: the end state equals an uninterrupted run's.
#[tokio::test(flavor = "multi_thread")]
async fn a_crash_after_any_durable_step_resumes_to_the_same_end_state() {
    let crashed = Demo::with_seed(42).await;
    let clean = Demo::with_seed(42).await;
    let mut crashes = 0;
    loop {
        let out = erase_in_child(&crashed.dir, "erasure-0001", "erase-durable-step=panic");
        if out.status.success() {
            break;
        }
        assert_eq!(
            out.status.code(),
            Some(101),
            "a failpoint panic, not an error: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        crashes += 1;
        assert!(crashes < 200, "the erasure never finishes");
    }
    eprintln!("the erasure stopped {crashes} times");
    assert!(
        crashes >= 12,
        "planned, registered, 10 steps and the cleanup phases each stop once ({crashes})"
    );
    assert_same_end_state(&crashed, &clean, "erasure-0001").await;
    let entries = lethe::erasure::register::Register::in_state(&crashed.ws.config.paths.state)
        .entries()
        .unwrap();
    assert_eq!(entries.len(), 1, "one register entry");
}

/// `lethe erase` of learner 3590 as `request` in a child process, with `failpoints` set.
fn erase_in_child(dir: &Path, request: &str, failpoints: &str) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_lethe"))
        .args([
            "erase",
            "--subject",
            "learner=3590",
            "--request",
            request,
            "--min-age",
            "0",
        ])
        .current_dir(dir)
        .env("FAILPOINTS", failpoints)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap()
}

/// Erases learner 3590 as request `id` on `clean`, uninterrupted, and asserts that `crashed`
/// (stopped and resumed) has the same tables with the same rows and no unreferenced file.
async fn assert_same_end_state(crashed: &Demo, clean: &Demo, id: &str) {
    erase(&clean.ws, &[request(3590, id)], &erase_opts(), &|_| {})
        .await
        .unwrap();
    let (a, b) = (contents(&crashed.ws).await, contents(&clean.ws).await);
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    let differ: Vec<&String> = a.keys().filter(|t| a[*t] != b[*t]).collect();
    assert!(
        differ.is_empty(),
        "same rows in every table; these differ: {differ:?}"
    );
    assert_eq!(unreferenced(&crashed.ws).await, 0, "no unreferenced files");
}

/// The row steps run together: one of them dying before its commit (a panic in its task,
/// the process gone with the others' commits landed or not) leaves a journal that resumes to
/// an uninterrupted run's end state, the dead step not recorded as done.
#[tokio::test(flavor = "multi_thread")]
async fn a_crash_inside_steps_run_together_resumes_to_the_same_end_state() {
    let crashed = Demo::with_seed(42).await;
    let clean = Demo::with_seed(42).await;
    let out = erase_in_child(
        &crashed.dir,
        "erasure-0002",
        "row-rewrite-planned/learning.events=panic",
    );
    assert_eq!(
        out.status.code(),
        Some(101),
        "the step's panic ends the process: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let journal = lethe::erasure::erase::load_journal(&crashed.ws, "erasure-0002")
        .unwrap()
        .expect("the journal of the stopped erasure");
    let step = |t: &str| journal.steps.iter().find(|s| s.table == t).unwrap();
    assert!(!step("learning.events").done, "the dead step is not done");
    assert!(journal.finished_at.is_none());
    let out = erase_in_child(&crashed.dir, "erasure-0002", "");
    assert!(
        out.status.success(),
        "the erasure resumes: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_same_end_state(&crashed, &clean, "erasure-0002").await;
    let journal = lethe::erasure::erase::load_journal(&crashed.ws, "erasure-0002")
        .unwrap()
        .unwrap();
    assert!(journal.steps.iter().all(|s| s.done), "every step done");
    assert!(journal.finished_at.is_some());
}

/// Randomized histories: the sweep never removes a referenced file, never one younger than the
/// minimum age, and a file a concurrent writer is still writing survives.
#[tokio::test(flavor = "multi_thread")]
async fn the_sweep_keeps_referenced_young_and_in_flight_files() {
    let seed = seed(99);
    let demo = Demo::new().await;
    let ws = &demo.ws;
    let wh = &ws.warehouse;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let name = TableName::parse("learning.reviews").unwrap();
    let now = chrono::Utc::now();
    for round in 0..4 {
        // A random history: deletes, an expiry that leaves files behind, a tag.
        for _ in 0..rng.random_range(1..4) {
            let id = rng.random_range(1..5000);
            rewrite_rows(
                wh,
                &name,
                &RowRewrite::delete(Predicate::eq("learner_id", Value::Int(id))),
            )
            .await
            .unwrap();
        }
        let t = wh.load(&name).await.unwrap();
        let loc = wh.store.local_path(t.location()).unwrap();
        // Planted files: orphans old and young, and one still being written.
        let mut old = Vec::new();
        let mut young = Vec::new();
        for i in 0..rng.random_range(2..6) {
            let p = loc.join(format!("data/orphan-{round}-{i}.parquet"));
            std::fs::write(&p, b"not really parquet").unwrap();
            let age_h = rng.random_range(0..200);
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            f.set_modified((now - Duration::hours(age_h)).into())
                .unwrap();
            if age_h >= 72 {
                old.push(p)
            } else {
                young.push(p)
            }
        }
        let in_flight = loc.join(format!("data/in-flight-{round}.parquet"));
        let mut writer = std::fs::File::create(&in_flight).unwrap();
        std::io::Write::write_all(&mut writer, b"PAR1 partial").unwrap();
        let refs = referenced(wh, &t).await.unwrap();
        let clock = FixedClock(now);
        let r = sweep(wh, &name, Duration::hours(72), false, &clock)
            .await
            .unwrap();
        for f in &refs {
            assert!(
                wh.store.exists(f).unwrap(),
                "round {round}: a referenced file was removed: {f}"
            );
        }
        for p in &young {
            assert!(
                p.exists(),
                "round {round}: a file younger than the minimum age was removed"
            );
        }
        for p in &old {
            assert!(!p.exists(), "round {round}: an old orphan survived");
        }
        assert!(
            in_flight.exists(),
            "round {round}: the file being written was removed"
        );
        assert!(r.removed >= old.len());
        drop(writer);
        // The table is still whole: every live file reads.
        let t = wh.load(&name).await.unwrap();
        select_rows(wh, &t, &Predicate::True).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_erases_many_in_one_pass_with_an_entry_and_counts_each() {
    let demo = Demo::new().await;
    let ws = &demo.ws;
    let ids: Vec<i64> = (1..=40).map(|i| i * 97).collect();
    let file = demo.dir.join("subjects.txt");
    let text: String = ids
        .iter()
        .enumerate()
        .map(|(i, id)| format!("erasure-b{i:03} learner={id}\n"))
        .collect();
    std::fs::write(&file, format!("# the week's requests\n{text}")).unwrap();
    let events_before = count_rows(
        &ws.warehouse,
        &ws.warehouse.load_str("learning.events").await.unwrap(),
        &Predicate::is_in("learner_id", ids.iter().map(|i| Value::Int(*i)).collect()),
    )
    .await
    .unwrap()
    .0;
    let out: serde_json::Value = serde_json::from_str(&demo.lethe_ok(
        &[
            "erase",
            "--subjects-file",
            file.to_str().unwrap(),
            "--min-age",
            "0",
            "--json",
        ],
        0,
    ))
    .unwrap();
    let j = &out["journal"];
    assert_eq!(j["requests"].as_array().unwrap().len(), 40);
    let events_step = j["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["table"] == "learning.events")
        .unwrap();
    assert_eq!(
        events_step["rows"], events_before,
        "one rewrite of the table for every subject"
    );
    let register = lethe::erasure::register::Register::in_state(&ws.config.paths.state)
        .entries()
        .unwrap();
    assert_eq!(register.len(), 40);
    let mut total = 0;
    for (i, _) in ids.iter().enumerate() {
        let case = lethe::erasure::case::read_case(ws, &format!("erasure-b{i:03}")).unwrap();
        total += case.rows.get("learning.events").copied().unwrap_or(0);
    }
    assert_eq!(total, events_before, "per-request counts add up");
    for id in &ids {
        assert_eq!(rows_of_learner(ws, "crm.learners", *id).await, 0);
    }
    // The bookkeeping written a batch at a time (issue 49): every request's record went
    // through its states, every case file is private, no temporary file is left.
    let records = lethe::requests::Requests::in_state(&ws.config.paths.state);
    for i in 0..ids.len() {
        let r = records.get(&format!("erasure-b{i:03}")).unwrap();
        assert_eq!(r.state, lethe::requests::State::PendingVerification);
        let states: Vec<_> = r.history.iter().map(|e| e.state).collect();
        assert_eq!(
            states,
            [
                lethe::requests::State::Received,
                lethe::requests::State::InProgress,
                lethe::requests::State::PendingVerification
            ]
        );
        let case = lethe::erasure::case::case_path(ws, &format!("erasure-b{i:03}"));
        let mode = std::fs::metadata(&case).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", case.display());
    }
    for dir in ["state/requests", "state/cases", "state/erasures"] {
        for e in std::fs::read_dir(demo.dir.join(dir)).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            assert!(!name.ends_with(".lethe-tmp"), "{dir}/{name} left behind");
        }
    }
    // A request ID a finished batch used is refused in another batch, naming that batch,
    // before anything is written.
    std::fs::write(&file, "erasure-new learner=5\nerasure-b007 learner=6\n").unwrap();
    let out = lethe_in(
        &demo.dir,
        &[
            "erase",
            "--subjects-file",
            file.to_str().unwrap(),
            "--min-age",
            "0",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("request erasure-b007 is already part of erasure")
            && err.contains(j["batch"].as_str().unwrap()),
        "{err}"
    );
    assert!(records.find("erasure-new").unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_erases_nobody() {
    let demo = Demo::new().await;
    let before = futures_locations(&demo.ws).await;
    let file = demo.dir.join("subjects.txt");
    std::fs::write(&file, "erasure-1 learner=1\nerasure-2 learner 2\n").unwrap();
    let out = lethe_in(
        &demo.dir,
        &["erase", "--subjects-file", file.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("subjects.txt:2:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = lethe_in(&demo.dir, &["erase", "--resume", "erasure-9999"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no erasure with request erasure-9999"));
    assert_eq!(before, futures_locations(&demo.ws).await);
    assert!(!demo.dir.join("state/register.jsonl").exists());
    assert!(!Path::new(&demo.dir.join("state/erasures")).exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_blocked_table_refuses_the_whole_erasure_before_any_change() {
    let demo = Demo::new().await;
    let wh = &demo.ws.warehouse;
    for (t, k, v) in [
        ("crm.learners", "gc.enabled", "false"),
        (
            "learning.events",
            "history.expire.min-snapshots-to-keep",
            "3",
        ),
    ] {
        let mut a = lethe_iceberg::commit::SetProperties::default();
        a.set.insert(k.into(), v.into());
        lethe_iceberg::commit::commit(wh, &TableName::parse(t).unwrap(), &mut a)
            .await
            .unwrap();
    }
    let before = futures_locations(&demo.ws).await;
    let out = demo.lethe(&[
        "erase",
        "--subject",
        "learner=3590",
        "--request",
        "erasure-0001",
        "--min-age",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("crm.learners: gc.enabled=false"), "{err}");
    assert!(
        err.contains("learning.events: history.expire.min-snapshots-to-keep=3"),
        "{err}"
    );
    assert_eq!(
        before,
        futures_locations(&demo.ws).await,
        "no table changed"
    );
    assert!(
        !demo.dir.join("state/register.jsonl").exists(),
        "no register entry"
    );
    assert!(
        lethe::requests::Requests::in_state(&demo.ws.config.paths.state)
            .find("erasure-0001")
            .unwrap()
            .is_none(),
        "no request record: the erasure was refused before it started"
    );
    // A missing key is refused too (a demo without its key file).
    let key = std::fs::read(demo.dir.join("state/register.key")).unwrap();
    std::fs::remove_file(demo.dir.join("state/register.key")).unwrap();
    let args = [
        "erase",
        "--subject",
        "learner=1",
        "--request",
        "erasure-0002",
    ];
    let out = demo.lethe(&args);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    // Issue 44 (item 18): the advice is one lethe takes (lethe.toml has no [register]).
    assert!(
        err.contains("no register key")
            && err.contains("LETHE_REGISTER_KEY_FILE")
            && err.contains("register.key in the state folder")
            && !err.contains("[register]"),
        "{err}"
    );
    // Each way it names gets past the key (to the blocked tables' refusal).
    let elsewhere = demo.tmp.path().join("my-register.key");
    crate::common::write_private(&elsewhere, &key);
    let past_the_key = |out: std::process::Output| {
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !err.contains("no register key") && err.contains("min-snapshots-to-keep=3"),
            "{err}"
        );
    };
    past_the_key(
        std::process::Command::new(env!("CARGO_BIN_EXE_lethe"))
            .args(args)
            .current_dir(&demo.dir)
            .env_remove("LETHE_REGISTER_KEY")
            .env("LETHE_REGISTER_KEY_FILE", &elsewhere)
            .output()
            .unwrap(),
    );
    past_the_key(
        std::process::Command::new(env!("CARGO_BIN_EXE_lethe"))
            .args(args)
            .current_dir(&demo.dir)
            .env_remove("LETHE_REGISTER_KEY_FILE")
            .env(
                "LETHE_REGISTER_KEY",
                String::from_utf8(key.clone()).unwrap().trim(),
            )
            .output()
            .unwrap(),
    );
    crate::common::write_private(&demo.dir.join("state/register.key"), &key);
    past_the_key(demo.lethe(&args));
    let _ = BTreeSet::<i32>::new();
    let _ = append;
}

/// Issue 18: preparing an erasure reads each selection of a table's rows once — the root table
/// is asked for the lineage window, the identifying values and the mapped email by its root
/// identifier (one read), and its own step's rows by the root identifier or the email (issue
/// 43: every column that addresses the subject; a second read); a key label's table for the
/// label and for its step.
#[tokio::test(flavor = "multi_thread")]
async fn preparing_an_erasure_reads_each_selection_once() {
    let demo = Demo::new().await;
    let ws = &demo.ws;
    let prepared = lethe::erasure::erase::prepare(
        ws,
        &ws.governance().unwrap(),
        &[request(3590, "probe")],
        None,
        &|_| {},
    )
    .await
    .unwrap();
    assert_eq!(
        prepared.reads.get("crm.learners"),
        Some(&2),
        "{:?}",
        prepared.reads
    );
    for (table, n) in prepared.reads.iter().filter(|(t, _)| *t != "crm.learners") {
        assert_eq!(*n, 1, "{table} read {n} times: {:?}", prepared.reads);
    }
    // What was read still makes the same traces: the root values, the rows per table.
    let case = &prepared.cases[0];
    assert!(case.values.iter().any(|v| v.kind == "email"));
    assert!(case.rows.get("crm.learners") == Some(&1), "{:?}", case.rows);
    assert!(case.rows.get("learning.events").is_some_and(|n| *n > 0));
    // Each row step costs the bytes of the files holding the learner's rows (what the
    // schedule starts first by), counted here by reading every data file of the table.
    assert_eq!(prepared.costs.len(), prepared.steps.len());
    let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
    for (s, cost) in prepared.steps.iter().zip(&prepared.costs) {
        if s.column.as_deref() != Some("learner_id") || s.values != [Value::Int(3590)] {
            continue;
        }
        let t = ws
            .warehouse
            .load(&TableName::parse(&s.table).unwrap())
            .await
            .unwrap();
        let mut holding = 0;
        let mut total = 0;
        for f in ws.warehouse.current_files(&t).await.unwrap() {
            if !f.is_data() {
                continue;
            }
            let df = &f.entry.data_file;
            total += df.file_size_in_bytes();
            let path = lethe_iceberg::store::normalize_local(df.file_path()).unwrap();
            let rows = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                std::fs::File::open(path).unwrap(),
            )
            .unwrap()
            .build()
            .unwrap();
            let mut holds = false;
            for b in rows {
                let b = b.unwrap();
                let c = arrow::compute::cast(
                    b.column_by_name("learner_id").unwrap(),
                    &arrow::datatypes::DataType::Int64,
                )
                .unwrap();
                let c = c
                    .as_any()
                    .downcast_ref::<arrow::array::Int64Array>()
                    .unwrap();
                holds |= c.iter().any(|v| v == Some(3590));
            }
            if holds {
                holding += df.file_size_in_bytes();
            }
        }
        assert_eq!(*cost, holding, "{}: {cost} of {total} bytes", s.table);
        assert!(*cost > 0, "{} holds the learner's rows", s.table);
        totals.insert(&s.table, total);
    }
    let events = prepared
        .steps
        .iter()
        .position(|s| s.table == "learning.events")
        .unwrap();
    assert!(
        prepared.costs[events] < totals["learning.events"],
        "only the files holding the learner count"
    );
}

/// Issue 18: an erasure's RECOMPUTE reruns a pipeline only when something it reads changed:
/// not when every input is at the snapshot its last run read, again when one changed, and
/// the rerun's rows are those of a full run.
#[tokio::test(flavor = "multi_thread")]
async fn a_pipeline_is_rerun_only_when_an_input_changed() {
    use lethe::pipeline::{Pipeline, rerun_if_changed, run};
    let demo = Demo::new().await;
    let ws = &demo.ws;
    let p = Pipeline::find(&ws.config.paths.pipelines, "course_performance").unwrap();
    let target = "analytics.course_performance";
    let snap =
        |t: &lethe_iceberg::table::LoadedTable| t.current_snapshot().map(|s| s.snapshot_id());
    run(ws, &p).await.unwrap();
    let built = ws.warehouse.load_str(target).await.unwrap();
    let props = built
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties
        .clone();
    let inputs = &props[lethe::pipeline::INPUTS_KEY];
    for t in [
        "learning.courses",
        "learning.enrollments",
        "learning.reviews",
    ] {
        assert!(inputs.contains(&format!(" {t}@")), "{inputs}");
    }
    assert!(
        !inputs.contains("crm.learners"),
        "only what the query names: {inputs}"
    );
    // Nothing it reads changed: not rerun, nothing committed.
    assert!(
        rerun_if_changed(ws, &p, BTreeMap::new())
            .await
            .unwrap()
            .is_none()
    );
    let same = ws.warehouse.load_str(target).await.unwrap();
    assert_eq!(snap(&same), snap(&built));
    // A table it doesn't read changes: still not rerun.
    let learners = TableName::parse("crm.learners").unwrap();
    rewrite_rows(
        &ws.warehouse,
        &learners,
        &RowRewrite::delete(Predicate::eq("learner_id", Value::Int(7))),
    )
    .await
    .unwrap();
    assert!(
        rerun_if_changed(ws, &p, BTreeMap::new())
            .await
            .unwrap()
            .is_none()
    );
    // An input changes: rerun, and its rows are a full run's.
    let reviews = TableName::parse("learning.reviews").unwrap();
    let r = rewrite_rows(
        &ws.warehouse,
        &reviews,
        &RowRewrite::delete(Predicate::eq("learner_id", Value::Int(3590))),
    )
    .await
    .unwrap();
    assert!(r.rows_matched > 0, "learner 3590 has reviews");
    let rerun = rerun_if_changed(ws, &p, BTreeMap::new())
        .await
        .unwrap()
        .expect("rerun after its input changed");
    assert_ne!(rerun.snapshot_id, snap(&built));
    let after_rerun = contents(ws).await[target].clone();
    run(ws, &p).await.unwrap();
    assert_eq!(contents(ws).await[target], after_rerun);
    // The target changed by something else than its pipeline: rerun.
    let t = TableName::parse(target).unwrap();
    rewrite_rows(
        &ws.warehouse,
        &t,
        &RowRewrite::delete(Predicate::eq("course_id", Value::Int(1))),
    )
    .await
    .unwrap();
    assert!(
        rerun_if_changed(ws, &p, BTreeMap::new())
            .await
            .unwrap()
            .is_some()
    );
}

/// The rows a full run of `p` would write now (computed, not committed), as sorted lines.
async fn full_run_rows(ws: &Workspace, p: &lethe::pipeline::Pipeline) -> Vec<String> {
    let ctx = lethe::pipeline::session(ws).await.unwrap();
    let batches = ctx.sql(&p.sql).await.unwrap().collect().await.unwrap();
    sorted_lines(&batches)
}

/// Extra pipelines over the demo's tables for the incremental recompute's tests: (name, SQL
/// after the header, whether a change of enrollments or reviews is recomputed incrementally,
/// the reason's words when it is not).
const RECOMPUTE_SHAPES: &[(&str, &str, Option<&str>)] = &[
    (
        "inner_join",
        "SELECT e.course_id, count(*) AS n, sum(r.rating) AS stars FROM learning.enrollments e \
         JOIN learning.reviews r ON r.course_id = e.course_id AND r.learner_id = e.learner_id GROUP BY e.course_id",
        None,
    ),
    (
        "having",
        "SELECT e.course_id, count(DISTINCT e.learner_id) AS learners, max(e.enrolled_at) AS last \
         FROM learning.enrollments e GROUP BY e.course_id HAVING count(*) > 2",
        None,
    ),
    (
        "lone_distinct",
        "SELECT r.course_id, count(DISTINCT r.learner_id) AS reviewers FROM learning.reviews r GROUP BY r.course_id",
        None,
    ),
    (
        "right_join",
        "SELECT c.course_id, count(e.enrollment_id) AS n FROM learning.enrollments e \
         RIGHT JOIN learning.courses c ON c.course_id = e.course_id GROUP BY c.course_id",
        None,
    ),
    (
        "null_side_key",
        "SELECT e.course_id, count(c.course_id) AS n FROM learning.courses c \
         LEFT JOIN learning.enrollments e ON e.course_id = c.course_id GROUP BY e.course_id",
        Some("no output column bounds"),
    ),
    (
        "window",
        "SELECT e.learner_id, e.course_id, CAST(row_number() OVER (PARTITION BY e.course_id ORDER BY e.enrollment_id) AS BIGINT) AS nth \
         FROM learning.enrollments e",
        Some("window"),
    ),
    (
        "top_courses",
        "SELECT course_id, count(*) AS n FROM learning.enrollments GROUP BY course_id ORDER BY n DESC, course_id LIMIT 5",
        Some("LIMIT"),
    ),
];

fn write_shapes(ws: &Workspace) -> Vec<lethe::pipeline::Pipeline> {
    let dir = &ws.config.paths.pipelines;
    let mut out = Vec::new();
    for (name, sql, _) in RECOMPUTE_SHAPES {
        std::fs::write(
            dir.join(format!("{name}.sql")),
            format!("-- lethe:target shapes.{name}\n{sql}\n"),
        )
        .unwrap();
        out.push(lethe::pipeline::Pipeline::find(dir, name).unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn an_incremental_recompute_equals_a_full_run_after_random_changes() {
    use lethe::pipeline::{Pipeline, RecomputeMode, recompute, run};
    let seed = seed(186);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let demo = Demo::new().await;
    let ws = &demo.ws;
    let mut pipelines = write_shapes(ws);
    pipelines.push(Pipeline::find(&ws.config.paths.pipelines, "course_performance").unwrap());
    for p in &pipelines {
        run(ws, p).await.unwrap();
    }
    let enrollments = TableName::parse("learning.enrollments").unwrap();
    let reviews = TableName::parse("learning.reviews").unwrap();
    let courses = TableName::parse("learning.courses").unwrap();
    let mut incremental: BTreeMap<String, usize> = BTreeMap::new();
    for round in 0..3 {
        // Random subjects' rows deleted, some ratings nulled, sometimes a course deleted and
        // an enrollment added.
        let learners: Vec<Value> = (0..rng.random_range(1..6))
            .map(|_| Value::Int(rng.random_range(1..=5_000)))
            .collect();
        let mut changed_courses = false;
        for t in [&enrollments, &reviews] {
            rewrite_rows(
                &ws.warehouse,
                t,
                &RowRewrite::delete(Predicate::is_in("learner_id", learners.clone())),
            )
            .await
            .unwrap();
        }
        rewrite_rows(
            &ws.warehouse,
            &reviews,
            &RowRewrite::delete(Predicate::eq(
                "review_id",
                Value::Int(rng.random_range(1..=1_000)),
            )),
        )
        .await
        .unwrap();
        rewrite_rows(
            &ws.warehouse,
            &reviews,
            &RowRewrite::set_null(
                Predicate::eq("learner_id", Value::Int(rng.random_range(1..=5_000))),
                vec!["rating".into()],
            ),
        )
        .await
        .unwrap();
        if rng.random_bool(0.5) {
            changed_courses = true;
            rewrite_rows(
                &ws.warehouse,
                &courses,
                &RowRewrite::delete(Predicate::eq(
                    "course_id",
                    Value::Int(rng.random_range(1..=120)),
                )),
            )
            .await
            .unwrap();
            let t = ws.warehouse.load(&enrollments).await.unwrap();
            let one = select_rows(
                &ws.warehouse,
                &t,
                &Predicate::eq("enrollment_id", Value::Int(rng.random_range(1..=100))),
            )
            .await
            .unwrap();
            append(
                &ws.warehouse,
                &enrollments,
                &one,
                BTreeMap::new(),
                Default::default(),
            )
            .await
            .unwrap();
        }
        for p in &pipelines {
            let expected = full_run_rows(ws, p).await;
            let done = recompute(ws, p, BTreeMap::new()).await.unwrap();
            let shape = RECOMPUTE_SHAPES.iter().find(|s| s.0 == p.name);
            match shape.and_then(|s| s.2) {
                None => {
                    assert_ne!(
                        done.how.mode,
                        RecomputeMode::Full,
                        "seed {seed} round {round}: {} ({})",
                        p.name,
                        done.how
                    );
                    if done.how.mode == RecomputeMode::Incremental {
                        *incremental.entry(p.name.clone()).or_insert(0) += 1;
                    }
                }
                Some(why) => {
                    assert_eq!(done.how.mode, RecomputeMode::Full, "{}", p.name);
                    let reason = done.how.reason.clone().unwrap_or_default();
                    assert!(reason.contains(why), "{}: {reason}", p.name);
                }
            }
            let got = table_rows(ws, &p.target).await;
            assert_eq!(
                got, expected,
                "seed {seed} round {round}: {} ({}; courses changed: {changed_courses}) differs from a full run",
                p.name, done.how
            );
        }
    }
    for p in &pipelines {
        let expected = RECOMPUTE_SHAPES
            .iter()
            .find(|s| s.0 == p.name)
            .is_none_or(|s| s.2.is_none());
        assert_eq!(
            incremental.contains_key(&p.name),
            expected,
            "seed {seed}: {} incremental {incremental:?}",
            p.name
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_incremental_recompute_ignores_changes_of_columns_its_query_does_not_read() {
    use lethe::pipeline::{Pipeline, RecomputeMode, recompute, run};
    let demo = Demo::new().await;
    let ws = &demo.ws;
    let p = Pipeline::find(&ws.config.paths.pipelines, "course_performance").unwrap();
    run(ws, &p).await.unwrap();
    let target = TableName::parse("analytics.course_performance").unwrap();
    let before = ws
        .warehouse
        .load(&target)
        .await
        .unwrap()
        .metadata
        .current_snapshot_id();
    // Columns the query reads none of: enrollments' completed_at, reviews' text.
    for (table, column) in [
        ("learning.enrollments", "completed_at"),
        ("learning.reviews", "text"),
    ] {
        rewrite_rows(
            &ws.warehouse,
            &TableName::parse(table).unwrap(),
            &RowRewrite::set_null(
                Predicate::is_in("learner_id", vec![Value::Int(3590), Value::Int(17)]),
                vec![column.into()],
            ),
        )
        .await
        .unwrap();
    }
    let done = recompute(ws, &p, BTreeMap::new()).await.unwrap();
    assert_eq!(done.how.mode, RecomputeMode::Incremental, "{}", done.how);
    assert_eq!(done.how.keys, 0, "{}", done.how);
    assert!(done.run.is_none(), "nothing to write: {:?}", done.run);
    assert_eq!(
        ws.warehouse
            .load(&target)
            .await
            .unwrap()
            .metadata
            .current_snapshot_id(),
        before,
        "the target is not rewritten"
    );
    // A column it reads: the ratings of learner 3590's reviews.
    rewrite_rows(
        &ws.warehouse,
        &TableName::parse("learning.reviews").unwrap(),
        &RowRewrite::set_null(
            Predicate::eq("learner_id", Value::Int(3590)),
            vec!["rating".into()],
        ),
    )
    .await
    .unwrap();
    let done = recompute(ws, &p, BTreeMap::new()).await.unwrap();
    assert_eq!(done.how.mode, RecomputeMode::Incremental, "{}", done.how);
    assert!(done.how.keys >= 1, "{}", done.how);
    assert!(done.run.is_some());
    assert_eq!(
        table_rows(ws, &target).await,
        full_run_rows(ws, &p).await,
        "the same rows as a full run"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_demos_erasure_recomputes_course_performance_incrementally() {
    use lethe::pipeline::{Pipeline, RecomputeMode};
    let demo = Demo::new().await;
    let ws = &demo.ws;
    let said = std::sync::Mutex::new(Vec::<String>::new());
    let report = erase(ws, &[request(3590, "e-incremental")], &erase_opts(), &|m| {
        said.lock().unwrap().push(m.to_string())
    })
    .await
    .unwrap();
    // Each changed table is swept once, among the steps, and only after every piece that
    // reads it: the RECOMPUTE reads enrollments and reviews (its incremental diff compares
    // their old files with the new), so their sweeps start after it landed.
    let said = said.into_inner().unwrap();
    let at = |pred: &dyn Fn(&str) -> bool| said.iter().position(|m| pred(m));
    let recomputed = at(&|m| m.starts_with("RECOMPUTE analytics.course_performance: "))
        .expect("the RECOMPUTE's landing is reported");
    for t in ["learning.enrollments", "learning.reviews"] {
        let swept = said
            .iter()
            .enumerate()
            .filter(|(_, m)| m.starts_with("cleanup sweep ") && m.ends_with(&format!(" {t}")))
            .map(|(i, _)| i)
            .collect::<Vec<_>>();
        assert_eq!(swept.len(), 1, "{t} swept once: {said:#?}");
        assert!(
            swept[0] > recomputed,
            "{t} swept after the RECOMPUTE: {said:#?}"
        );
    }
    let changed: Vec<&String> = report.journal.cleanup.keys().collect::<Vec<_>>();
    assert!(changed.len() >= 3, "{changed:?}");
    for t in &changed {
        assert!(
            report.journal.cleanup[*t].phases.contains("sweep"),
            "{t}'s sweep recorded"
        );
        assert_eq!(
            said.iter()
                .filter(|m| m.starts_with("cleanup sweep ") && m.ends_with(&format!(" {t}")))
                .count(),
            1,
            "{t} swept once"
        );
    }
    assert_eq!(unreferenced(ws).await, 0, "no unreferenced files");
    let step = report
        .journal
        .steps
        .iter()
        .find(|s| s.table == "analytics.course_performance")
        .unwrap();
    let how = step
        .recompute
        .clone()
        .expect("the RECOMPUTE says how it ran");
    assert_eq!(how.mode, RecomputeMode::Incremental, "{how}");
    assert_eq!(how.key.as_deref(), Some("course_id"));
    assert!(
        (1..=2).contains(&how.keys),
        "learner 3590's two enrollments and one review name at most two courses: {how}"
    );
    let json = serde_json::to_value(&report.journal).unwrap();
    assert!(
        json["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["recompute"]["mode"] == "incremental"),
        "the journal's JSON records the mode"
    );
    let target = TableName::parse("analytics.course_performance").unwrap();
    let incremental = table_rows(ws, &target).await;
    let p = Pipeline::find(&ws.config.paths.pipelines, "course_performance").unwrap();
    assert_eq!(
        incremental,
        full_run_rows(ws, &p).await,
        "a full run's rows"
    );
    assert_eq!(incremental.len(), 120, "one row per course");
    let py = pyiceberg(
        &demo.dir,
        "read_tables.py",
        &["analytics.course_performance"],
        None,
    );
    assert_eq!(
        py["analytics.course_performance"]["rows"],
        serde_json::json!(incremental.len()),
        "PyIceberg reads the incremental commit: {py}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recompute_that_cant_be_incremental_runs_in_full_and_says_why() {
    use lethe::pipeline::{Pipeline, RecomputeMode, recompute, run};
    let demo = Demo::new().await;
    let ws = &demo.ws;
    let dir = ws.config.paths.pipelines.clone();
    let mut p = Pipeline::find(&dir, "course_performance").unwrap();
    let target = TableName::parse("analytics.course_performance").unwrap();
    let enrollments = TableName::parse("learning.enrollments").unwrap();
    let delete_enrollment = |id: i64| {
        let ws = ws.clone();
        let enrollments = enrollments.clone();
        async move {
            rewrite_rows(
                &ws.warehouse,
                &enrollments,
                &RowRewrite::delete(Predicate::eq("enrollment_id", Value::Int(id))),
            )
            .await
            .unwrap();
        }
    };
    let check = |p: Pipeline, mode: RecomputeMode, why: &'static str| {
        let ws = ws.clone();
        let target = target.clone();
        async move {
            let expected = full_run_rows(&ws, &p).await;
            let done = recompute(&ws, &p, BTreeMap::new()).await.unwrap();
            assert_eq!(done.how.mode, mode, "{}", done.how);
            let reason = done.how.reason.clone().unwrap_or_default();
            assert!(reason.contains(why), "{why}: {reason}");
            assert_eq!(table_rows(&ws, &target).await, expected);
        }
    };
    run(ws, &p).await.unwrap();
    check(p.clone(), RecomputeMode::Unchanged, "").await;
    // The target changed by another writer: its rows are not the last run's.
    rewrite_rows(
        &ws.warehouse,
        &target,
        &RowRewrite::delete(Predicate::eq("course_id", Value::Int(1))),
    )
    .await
    .unwrap();
    delete_enrollment(1).await;
    check(p.clone(), RecomputeMode::Full, "not this pipeline's commit").await;
    // Then incremental again.
    delete_enrollment(2).await;
    check(p.clone(), RecomputeMode::Incremental, "").await;
    // A changed row without a key: the rows it altered can't be told.
    let t = ws.warehouse.load(&enrollments).await.unwrap();
    let one = select_rows(
        &ws.warehouse,
        &t,
        &Predicate::eq("enrollment_id", Value::Int(3)),
    )
    .await
    .unwrap();
    let b = &one[0];
    let i = b.schema().index_of("course_id").unwrap();
    let mut cols = b.columns().to_vec();
    cols[i] = arrow::array::new_null_array(cols[i].data_type(), b.num_rows());
    let keyless = arrow::array::RecordBatch::try_new(b.schema(), cols).unwrap();
    append(
        &ws.warehouse,
        &enrollments,
        &[keyless],
        BTreeMap::new(),
        Default::default(),
    )
    .await
    .unwrap();
    check(p.clone(), RecomputeMode::Full, "(NULL)").await;
    // The query changed since the last run.
    std::fs::write(&p.file, format!("{}-- counted again\n", p.sql)).unwrap();
    p = Pipeline::find(&dir, "course_performance").unwrap();
    delete_enrollment(4).await;
    check(p.clone(), RecomputeMode::Full, "the query changed").await;
    // Then incremental again; a batch that changes most courses runs in full (a cost
    // decision: the restricted query would read as much).
    delete_enrollment(5).await;
    check(p.clone(), RecomputeMode::Incremental, "").await;
    rewrite_rows(
        &ws.warehouse,
        &enrollments,
        &RowRewrite::delete(Predicate::is_in(
            "course_id",
            (1..=100).map(Value::Int).collect(),
        )),
    )
    .await
    .unwrap();
    check(p.clone(), RecomputeMode::Full, "costs a full run").await;
}

/// Every file under `dir`, recursively.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Regression (issue 44 item 9): a `kill -9` while a step rewrote a table left a 0-byte data
/// file (the one being written) that `--resume` did not remove: it is unreferenced and
/// younger than the sweep's minimum age, so it stayed, and the proof scan can't read it. The
/// erasure stops (failpoint `table-writer-file-created`) with its first data files created
/// and empty, is killed with SIGKILL, and resumed: the resumed erasure removes every file of
/// the killed runs by the names the journal recorded.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_rewrite_leaves_no_empty_file_after_resume() {
    let mut demo = Demo::new().await;
    let warehouse = demo.dir.join("warehouse");
    let before: BTreeSet<_> = files_under(&warehouse).into_iter().collect();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_lethe"))
        .args([
            "erase",
            "--subject",
            "learner=3590",
            "--request",
            "erasure-0001",
        ])
        .current_dir(&demo.dir)
        .env_remove("LETHE_REGISTER_KEY")
        .env_remove("LETHE_CONFIG")
        .env("FAILPOINTS", "table-writer-file-created=sleep(120000)")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run lethe");
    // Wait until a step has created a data file and stops before writing it, then kill -9.
    let started = std::time::Instant::now();
    let empty = loop {
        let empty: Vec<_> = files_under(&warehouse)
            .into_iter()
            .filter(|p| !before.contains(p) && p.extension().is_some_and(|e| e == "parquet"))
            .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() == 0))
            .collect();
        if !empty.is_empty() {
            break empty;
        }
        assert!(
            started.elapsed().as_secs() < 100,
            "no rewrite got to its first data file"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    child.kill().expect("kill -9");
    child.wait().unwrap();
    for p in &empty {
        assert_eq!(std::fs::metadata(p).unwrap().len(), 0, "{}", p.display());
    }
    // The resumed erasure finishes and leaves no file of the killed run behind.
    demo.lethe_ok(&["erase", "--resume", "erasure-0001"], 0);
    for p in &empty {
        assert!(!p.exists(), "{} is still there after --resume", p.display());
    }
    demo.reload();
    let ws = &demo.ws;
    let mut refs = std::collections::HashSet::new();
    for name in ws.warehouse.tables().await.unwrap() {
        let t = ws.warehouse.load(&name).await.unwrap();
        refs.extend(referenced(&ws.warehouse, &t).await.unwrap());
    }
    for p in files_under(&warehouse) {
        if before.contains(&p) || p.extension().is_none_or(|e| e != "parquet") {
            continue;
        }
        assert!(
            std::fs::metadata(&p).unwrap().len() > 0,
            "{} is empty",
            p.display()
        );
        let loc = ws
            .warehouse
            .store
            .normalize(&p.display().to_string())
            .unwrap();
        assert!(
            refs.contains(&loc),
            "{} is a file of the killed run nothing references",
            p.display()
        );
    }
    // The proof reads every file: none unreadable.
    let scan: serde_json::Value =
        serde_json::from_str(&demo.lethe_ok(&["scan", "--request", "erasure-0001", "--json"], 0))
            .unwrap();
    assert_eq!(
        scan["unreadable"],
        serde_json::json!([]),
        "{}",
        scan["unreadable"]
    );
}

/// Issue 44 (item 5): a duration or count flag out of range is an error naming the flag
/// (exit 2), never a panic (`--min-age` of 2^63 weeks overflowed chrono) nor a wrap
/// (`--months 4294967295` wrapped past the three-month cap). Checked before any workspace
/// is opened, so an empty folder will do.
#[test]
fn flags_out_of_range_are_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let huge = "9223372036854775807w";
    for (args, flag) in [
        (
            vec![
                "erase",
                "--subject",
                "learner=1",
                "--request",
                "r",
                "--min-age",
                huge,
            ],
            "--min-age",
        ),
        (
            vec!["erase", "--request", "r", "--min-age", "36526d"],
            "--min-age",
        ),
        (vec!["sweep", "--min-age", huge], "--min-age"),
        (vec!["drill", "--min-age", huge], "--min-age"),
        (vec!["expire", "--older-than", huge], "--older-than"),
        (
            vec![
                "request",
                "extend",
                "r",
                "--months",
                "4294967295",
                "--reason",
                "x",
                "--day",
                "2026-10-01",
            ],
            "--months",
        ),
        (
            vec![
                "request",
                "extend",
                "r",
                "--months",
                "3",
                "--reason",
                "x",
                "--day",
                "2026-10-01",
            ],
            "--months",
        ),
    ] {
        let out = lethe_in(dir.path(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(flag) && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}

/// Every file under `dir` with its size and modification time.
fn files_with_times(dir: &Path) -> BTreeMap<std::path::PathBuf, (u64, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                out.insert(e.path(), (m.len(), m.modified().unwrap()));
            }
        }
    }
    out
}

/// Issue 44 (item 8): after `cp -a demo copy`, the copy's catalog still names demo's files
/// (the SQL catalog stores absolute paths). Every command run in the copy that changes tables
/// refuses them — erase (at its preflight, before any store is touched), sweep, expire,
/// retention, properties — and nothing under demo's warehouse is written or deleted; demo
/// still reads. A table listed in `[tables_outside_warehouse]` at its location is allowed.
#[tokio::test(flavor = "multi_thread")]
async fn a_copied_workspace_changes_nothing_of_the_originals_warehouse() {
    let demo = Demo::new().await;
    let parent = tempfile::tempdir().unwrap();
    let copy = parent.path().join("copy");
    let cp = std::process::Command::new("cp")
        .arg("-a")
        .arg(&demo.dir)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(cp.success());
    let original = files_with_times(&demo.dir.join("warehouse"));
    let copied =
        Workspace::open(&lethe::config::Config::load(&copy.join("lethe.toml")).unwrap()).unwrap();
    let pointers = futures_locations(&copied).await;
    let learners = copied.warehouse.load_str("crm.learners").await.unwrap();
    assert!(
        learners.location().contains(&*demo.dir.to_string_lossy()),
        "the copy's catalog names demo's files: {}",
        learners.location()
    );

    let refused = |args: &[&str], code: i32| {
        let out = lethe_in(&copy, args);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(code), "lethe {args:?}: {all}");
        assert!(
            all.contains("is outside the warehouse") && all.contains("nothing was changed"),
            "lethe {args:?}: {all}"
        );
        all
    };
    let e = refused(
        &[
            "erase",
            "--subject",
            "learner=3590",
            "--request",
            "erasure-0001",
            "--min-age",
            "0s",
        ],
        1,
    );
    assert!(
        e.contains("crm.learners") && e.contains("[tables_outside_warehouse]"),
        "{e}"
    );
    refused(&["sweep", "--min-age", "0s"], 1);
    refused(
        &["sweep", "crm.learners", "--min-age", "0s", "--dry-run"],
        1,
    );
    refused(&["expire", "crm.learners", "--older-than", "0s"], 1);
    refused(&["retention", "apply", "--day", "2026-10-01"], 2);
    refused(&["properties", "apply"], 2);
    assert_eq!(
        files_with_times(&demo.dir.join("warehouse")),
        original,
        "a file of demo's warehouse was written or deleted"
    );
    assert_eq!(
        futures_locations(&copied).await,
        pointers,
        "the copy committed"
    );
    // The erasure stopped at its preflight: no register entry, no journal.
    assert!(
        !copy.join("state/register.jsonl").exists(),
        "a register entry"
    );
    assert!(
        lethe::erasure::erase::find_request(&copied, "erasure-0001")
            .unwrap()
            .is_none(),
        "a journal"
    );
    // demo itself is whole: every table loads and reads.
    demo.lethe_ok(&["tables"], 0);

    // Listed on purpose, at its location: the copy may sweep it (a dry run here).
    let cfg = copy.join("lethe.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!(
        "\n[tables_outside_warehouse]\n\"crm.learners\" = \"{}\"\n",
        learners.location()
    ));
    std::fs::write(&cfg, text).unwrap();
    let out = lethe_in(
        &copy,
        &["sweep", "crm.learners", "--min-age", "0s", "--dry-run"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    refused(
        &["sweep", "learning.events", "--min-age", "0s", "--dry-run"],
        1,
    );
}
