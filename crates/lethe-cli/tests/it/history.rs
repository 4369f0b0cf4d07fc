//! Issue 45: erasing a person from the history a table keeps — a tag, a branch with snapshots of
//! its own, `min-snapshots-to-keep = 3` on main — without taking time travel away from everyone
//! else. The fixture is written by PyIceberg (tests/interop/make_history_fixture.py) or by Spark
//! (scripts/spark_tool.py), and read back by both after lethe's erasure: every ref and every
//! kept snapshot, compared row by row with the same ref before.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::{Folder, interop_dir, python};

const KEY: &str = "history-test-register-key-0123456789abcdef";
const SUBJECT: &str = "CGB0000113";

const REWRITE: &str = "\n[snapshots.tables.\"finance.ledger\"]\nhistory = \"rewrite\"\nreason = \"the quarter's reports are reproduced from tag q3_close\"\ndecided_by = \"finance controller\"\n";

/// A warehouse (`src`, catalog name `lethe`) and a lethe folder over it (`home`, once
/// [`Fixture::init`] made it).
struct Fixture {
    _dir: tempfile::TempDir,
    src: PathBuf,
    home: PathBuf,
    folder: std::sync::OnceLock<Folder>,
}

impl Fixture {
    /// The PyIceberg-written fixture.
    fn pyiceberg() -> Fixture {
        let f = Fixture::empty();
        let out = Command::new(python())
            .arg(interop_dir().join("make_history_fixture.py"))
            .args(["make", &f.src.display().to_string(), "lethe"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        f.init();
        f
    }

    fn empty() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let home = dir.path().join("lethe");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        Fixture {
            _dir: dir,
            src,
            home,
            folder: std::sync::OnceLock::new(),
        }
    }

    fn init(&self) {
        let folder = Folder::init(&self.home, &self.src, KEY);
        std::fs::write(
            self.home.join("governance/subjects.toml"),
            "[customer]\nidentifiers = [\"crm.customers.customer_id\"]\n",
        )
        .unwrap();
        assert!(self.folder.set(folder).is_ok(), "initialised once");
    }

    fn folder(&self) -> &Folder {
        self.folder.get().expect("Fixture::init ran")
    }

    fn lethe(&self, args: &[&str]) -> Output {
        self.folder().lethe(args)
    }

    fn run(&self, args: &[&str], code: i32) -> String {
        self.folder().run(args, code)
    }

    fn json(&self, args: &[&str], code: i32) -> Value {
        self.folder().json(args, code)
    }

    fn allow_rewrite(&self) {
        let p = self.home.join("governance/retention.toml");
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str(REWRITE);
        std::fs::write(&p, text).unwrap();
    }

    /// Every table, ref and kept snapshot, read by PyIceberg.
    fn read(&self) -> Value {
        let out = Command::new(python())
            .arg(interop_dir().join("make_history_fixture.py"))
            .args(["read", &self.src.display().to_string(), "lethe"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// Rows (lists of text values) of a snapshot.
fn rows_of(v: &Value) -> Vec<Vec<Value>> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().clone())
        .collect()
}

fn holds_subject(row: &[Value]) -> bool {
    row.iter().any(|v| v.as_str() == Some(SUBJECT))
}

/// Per ref: the rows of the snapshot it points at.
fn ref_rows(table: &Value) -> BTreeMap<String, Vec<Vec<Value>>> {
    table["refs"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, id)| {
            let s = &table["snapshots"][id.as_i64().unwrap().to_string()];
            (name.clone(), rows_of(s))
        })
        .collect()
}

/// The whole claim on a warehouse that keeps history: without `history = "rewrite"` the
/// erasure refuses naming the option and changes nothing; with it, `explain` lists the kept
/// snapshots that get twins, the erasure rewrites them in one commit per table, and then every
/// ref still reads — the same rows as before but the subject's, compared row by row — no kept
/// snapshot holds the subject (PyIceberg time travel to each), the proof scan is clean and the
/// attestation lists every ref with its rows before and after and its snapshot old → new.
#[tokio::test(flavor = "multi_thread")]
async fn a_tag_a_branch_and_kept_snapshots_are_rewritten_without_the_subject() {
    let f = Fixture::pyiceberg();
    let before = f.read();
    let arg = format!("customer={SUBJECT}");

    // Refused, naming the option; nothing changed.
    let out = f.lethe(&[
        "erase",
        "--subject",
        &arg,
        "--request",
        "erasure-0001",
        "--min-age",
        "0",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for want in [
        "tag `q3_close`",
        "branch `audit`",
        "min-snapshots-to-keep=3",
        "history = \"rewrite\"",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    assert_eq!(f.read(), before, "the refusal changed nothing");

    f.allow_rewrite();
    let plan = f.json(&["explain", "--subject", &arg, "--json"], 0);
    let twins = plan["history"]["finance.ledger"]["twins"]
        .as_array()
        .unwrap();
    assert_eq!(
        twins.len(),
        6,
        "3 kept on main (one tagged), 3 on audit: {plan:#}"
    );
    assert!(plan["blocked"].as_object().unwrap().is_empty(), "{plan:#}");

    let erased = f.json(
        &[
            "erase",
            "--subject",
            &arg,
            "--request",
            "erasure-0002",
            "--min-age",
            "0",
            "--json",
        ],
        0,
    );
    let step = erased["journal"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["table"] == "finance.ledger")
        .unwrap()
        .clone();
    assert_eq!(step["twins"].as_array().unwrap().len(), 6, "{step:#}");

    // Every ref still reads: its rows before without the subject's, row for row.
    let after = f.read();
    let (b, a) = (&before["finance.ledger"], &after["finance.ledger"]);
    let (rb, ra) = (ref_rows(b), ref_rows(a));
    assert_eq!(
        rb.keys().collect::<Vec<_>>(),
        ra.keys().collect::<Vec<_>>(),
        "every ref is still there"
    );
    for (name, rows) in &rb {
        let want: Vec<Vec<Value>> = rows.iter().filter(|r| !holds_subject(r)).cloned().collect();
        assert!(want.len() < rows.len(), "{name} held the subject before");
        assert_eq!(ra[name], want, "ref {name}");
    }
    // No kept snapshot holds the subject; each twin names its original; the chains are kept.
    let snaps = a["snapshots"].as_object().unwrap();
    assert_eq!(snaps.len(), 6, "{a:#}");
    for (id, s) in snaps {
        assert!(
            !rows_of(s).iter().any(|r| holds_subject(r)),
            "snapshot {id} holds the subject"
        );
        let original = s["summary"]["lethe.twin-of"].as_str().unwrap();
        assert!(
            b["snapshots"].get(original).is_some(),
            "{id} is the twin of {original}"
        );
    }
    let audit_head = a["refs"]["audit"].as_i64().unwrap().to_string();
    let mut depth = 0;
    let mut cur = Some(audit_head);
    while let Some(id) = cur {
        depth += 1;
        cur = snaps
            .get(&id)
            .and_then(|s| s["parent"].as_i64())
            .map(|p| p.to_string())
            .filter(|p| snaps.contains_key(p));
    }
    assert_eq!(
        depth, 4,
        "audit's three snapshots and the tagged one it started from"
    );
    // Other tables and other customers untouched but for the subject's rows.
    for t in ["web.visits", "crm.customers"] {
        let cur = |v: &Value| {
            let id = v[t]["refs"]["main"].as_i64().unwrap().to_string();
            rows_of(&v[t]["snapshots"][id])
        };
        let want: Vec<Vec<Value>> = cur(&before)
            .into_iter()
            .filter(|r| !holds_subject(r))
            .collect();
        assert_eq!(cur(&after), want, "{t}");
    }

    // The proof and the attestation.
    let scan = f.json(&["scan", "--request", "erasure-0002", "--json"], 0);
    assert_eq!(scan["files_holding"], 0, "{scan:#}");
    let att = f.json(&["attest", "--request", "erasure-0002", "--json"], 0);
    assert_eq!(att["verdict"]["logical"], "COMPLETE", "{att:#}");
    let ledger = att["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == "finance.ledger")
        .unwrap();
    let history = ledger["history"].as_array().unwrap();
    for name in ["main", "q3_close", "audit"] {
        let w = history
            .iter()
            .find(|w| w["refs"].as_array().unwrap().iter().any(|r| r == name))
            .unwrap_or_else(|| panic!("{name} in {ledger:#}"));
        let old = w["original"].as_i64().unwrap();
        let new = w["twin"].as_i64().unwrap();
        assert_eq!(b["refs"][name], old, "{name}");
        assert_eq!(a["refs"][name], new, "{name}");
        assert_eq!(w["rows_before"], rb[name].len(), "{name}");
        assert_eq!(w["rows_after"], ra[name].len(), "{name}");
    }
    assert!(!att.to_string().contains(SUBJECT));
}

/// The rewrite is a change like any other: another writer committing to `main` between
/// lethe's plan and its commit (a PyIceberg append, through the failpoint the twins' plan
/// offers) makes lethe's commit lose the race; it replans on the new state, the appended rows
/// are kept on main, and still no kept snapshot holds the subject.
#[tokio::test(flavor = "multi_thread")]
async fn a_writer_appending_to_main_during_the_rewrite_loses_nothing() {
    let f = Fixture::pyiceberg();
    let src = f.src.clone();
    rewrite_beside(f, move || {
        let lines: String = (5000..5004)
            .map(|i| {
                format!(
                    "{{\"entry_id\": {i}, \"customer_id\": \"CGB0000101\", \"amount\": 1.0, \"memo\": \"late\"}}\n"
                )
            })
            .collect();
        crate::common::pyiceberg(&src, "append_rows.py", &["finance.ledger"], Some(&lines));
    })
    .await;
}

/// [`a_writer_appending_to_main_during_the_rewrite_loses_nothing`] with a Spark job (Spark 3.5,
/// Iceberg 1.10) as the other writer.
#[tokio::test(flavor = "multi_thread")]
async fn a_spark_job_appending_to_main_during_the_rewrite_loses_nothing() {
    let env = crate::v3::spark_env();
    let f = Fixture::pyiceberg();
    let src = f.src.clone();
    rewrite_beside(f, move || {
        let insert = "INSERT INTO lethe.finance.ledger SELECT id, 'CGB0000101', 1.0, 'late' FROM range(5000, 5004)".to_string();
        let c = sql(&[insert]);
        crate::v3::spark_batch(&env, &src, &[c.iter().map(String::as_str).collect()]);
    })
    .await;
}

/// Erases the subject from `f` (history rewrite allowed) in this process while `append` runs
/// once between the rewrite's plan and its commit, appending four rows with memo `late` to
/// `main`; then checks that they are on main and that no kept snapshot holds the subject.
async fn rewrite_beside(f: Fixture, append: impl Fn() + Send + Sync + 'static) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    f.allow_rewrite();
    let key_file = f.home.join("register.key");
    crate::common::write_private(&key_file, KEY);
    let ws = lethe::workspace::Workspace::open(
        &lethe::config::Config::load(&f.home.join("lethe.toml")).unwrap(),
    )
    .unwrap();
    let fired = Arc::new(AtomicBool::new(false));
    let f2 = fired.clone();
    fail::cfg_callback("twins-planned/finance.ledger", move || {
        if !f2.swap(true, Ordering::SeqCst) {
            append();
        }
    })
    .unwrap();
    let mut opts = crate::common::erase_opts();
    opts.key_file = Some(key_file);
    let r = lethe::erasure::erase::erase(
        &ws,
        &[lethe::erasure::case::RequestSpec {
            request: "erasure-0001".into(),
            subject: "customer".into(),
            id: SUBJECT.into(),
        }],
        &opts,
        &|_| {},
    )
    .await;
    fail::remove("twins-planned/finance.ledger");
    r.unwrap();
    assert!(fired.load(Ordering::SeqCst), "the other writer ran");
    let after = f.read();
    let a = &after["finance.ledger"];
    let main = &a["snapshots"][a["refs"]["main"].as_i64().unwrap().to_string()];
    let late = rows_of(main)
        .iter()
        .filter(|r| r.iter().any(|v| v.as_str() == Some("late")))
        .count();
    assert_eq!(late, 4, "the appended rows are on main");
    for (id, s) in a["snapshots"].as_object().unwrap() {
        assert!(
            !rows_of(s).iter().any(|r| holds_subject(r)),
            "snapshot {id} holds the subject"
        );
    }
}

/// Spark's statements that write a ledger of format `v` keeping history as the PyIceberg
/// fixture does: two commits, a tag and a branch on the second, three commits on the branch,
/// one more on main and a DELETE of other rows (copy-on-write in format 2, deletion vectors
/// in format 3), `min-snapshots-to-keep = 3`.
fn spark_ledger(v: u8) -> Vec<String> {
    let t = format!("lethe.finance.ledger{v}");
    let rows = |from: u32, to: u32, into: &str| {
        format!(
            "INSERT INTO {into} SELECT id, CASE WHEN id % 8 = 0 THEN '{SUBJECT}' ELSE concat('CGB00001', cast(10 + id % 30 AS string)) END, id * 1.5 FROM range({from}, {to})"
        )
    };
    let mode = if v == 3 {
        "merge-on-read"
    } else {
        "copy-on-write"
    };
    vec![
        format!(
            "CREATE TABLE {t} (entry_id bigint, customer_id string, amount double) USING iceberg TBLPROPERTIES ('format-version'='{v}', 'history.expire.min-snapshots-to-keep'='3', 'write.delete.mode'='{mode}')"
        ),
        rows(0, 64, &t),
        rows(64, 128, &t),
        format!("ALTER TABLE {t} CREATE TAG q3_close"),
        format!("ALTER TABLE {t} CREATE BRANCH audit"),
        rows(1000, 1032, &format!("{t}.branch_audit")),
        rows(1032, 1064, &format!("{t}.branch_audit")),
        rows(1064, 1096, &format!("{t}.branch_audit")),
        rows(128, 192, &t),
        format!("DELETE FROM {t} WHERE entry_id IN (129, 130, 131)"),
    ]
}

/// One `sql` command of spark_tool.py.
fn sql(statements: &[String]) -> Vec<String> {
    let mut c = vec!["sql".to_string()];
    for s in statements {
        c.push("--statement".into());
        c.push(s.clone());
    }
    c
}

/// Spark's rows of one statement's result as sorted lists of text values.
fn spark_result_rows(result: &Value) -> Vec<Vec<Value>> {
    let mut rows: Vec<Vec<Value>> = result["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            ["entry_id", "customer_id", "amount"]
                .iter()
                .map(|k| match &r[k] {
                    Value::Null => Value::Null,
                    v => Value::String(v.to_string().trim_matches('"').to_string()),
                })
                .collect()
        })
        .collect();
    rows.sort_by_key(|r| r.iter().map(|v| v.to_string()).collect::<Vec<_>>());
    rows
}

/// What Spark read of one table: per ref, its rows; and every snapshot id the table keeps.
type SparkRead = (BTreeMap<String, Vec<Vec<Value>>>, Vec<i64>);

/// Per ref of each table, the rows Spark reads (`VERSION AS OF 'ref'`), and every snapshot id
/// the table keeps.
fn spark_read(
    env: &[(String, String)],
    dir: &std::path::Path,
    tables: &[String],
) -> BTreeMap<String, SparkRead> {
    let mut commands = Vec::new();
    for t in tables {
        let mut st: Vec<String> = ["main", "q3_close", "audit"]
            .iter()
            .map(|r| format!("SELECT * FROM lethe.{t} VERSION AS OF '{r}'"))
            .collect();
        st.push(format!("SELECT snapshot_id FROM lethe.{t}.snapshots"));
        commands.push(sql(&st));
    }
    let args: Vec<Vec<&str>> = commands
        .iter()
        .map(|c| c.iter().map(String::as_str).collect())
        .collect();
    let out = crate::v3::spark_batch(env, dir, &args);
    let mut read = BTreeMap::new();
    for (t, o) in tables.iter().zip(out) {
        let results = o["results"].as_array().unwrap();
        let mut refs = BTreeMap::new();
        for (i, r) in ["main", "q3_close", "audit"].iter().enumerate() {
            refs.insert(r.to_string(), spark_result_rows(&results[i]));
        }
        let ids = results[3]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["snapshot_id"].as_i64().unwrap())
            .collect();
        read.insert(t.clone(), (refs, ids));
    }
    read
}

/// The same claim on tables Spark wrote, format 2 (copy-on-write) and format 3 (deletion
/// vectors): after lethe's rewrite Spark reads every ref with the rows it read before but the
/// subject's, Spark time travel to every kept snapshot finds no row of the subject, and
/// PyIceberg agrees on the format 2 table.
#[tokio::test(flavor = "multi_thread")]
async fn spark_written_tables_keep_every_ref_without_the_subject() {
    let env = crate::v3::spark_env();
    let f = Fixture::empty();
    let mut make = vec![
        "CREATE NAMESPACE IF NOT EXISTS lethe.crm".to_string(),
        "CREATE NAMESPACE IF NOT EXISTS lethe.finance".to_string(),
        "CREATE TABLE lethe.crm.customers (customer_id string, email string) USING iceberg"
            .to_string(),
        format!(
            "INSERT INTO lethe.crm.customers VALUES ('{SUBJECT}', 's@x.example'), ('CGB0000110', 'o@x.example')"
        ),
    ];
    make.extend(spark_ledger(2));
    make.extend(spark_ledger(3));
    let c = sql(&make);
    crate::v3::spark_batch(&env, &f.src, &[c.iter().map(String::as_str).collect()]);
    f.init();
    let p = f.home.join("governance/retention.toml");
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.push_str("\n[snapshots]\nhistory = \"rewrite\"\nreason = \"the quarter's reports are reproduced from tag q3_close\"\n");
    std::fs::write(&p, text).unwrap();
    let tables = vec!["finance.ledger2".to_string(), "finance.ledger3".to_string()];
    let before = spark_read(&env, &f.src, &tables);
    f.run(
        &[
            "erase",
            "--subject",
            &format!("customer={SUBJECT}"),
            "--request",
            "erasure-0001",
            "--min-age",
            "0",
        ],
        0,
    );
    let after = spark_read(&env, &f.src, &tables);
    for t in &tables {
        let (refs_before, _) = &before[t];
        let (refs_after, ids) = &after[t];
        for (name, rows) in refs_before {
            let want: Vec<Vec<Value>> =
                rows.iter().filter(|r| !holds_subject(r)).cloned().collect();
            assert!(want.len() < rows.len(), "{t} {name} held the subject");
            assert_eq!(refs_after[name], want, "{t} ref {name} (Spark)");
        }
        assert_eq!(ids.len(), 6, "{t}: 3 kept on main (one tagged), 3 on audit");
        let reads: Vec<String> = ids
            .iter()
            .map(|id| format!("SELECT * FROM lethe.{t} VERSION AS OF {id}"))
            .collect();
        let c = sql(&reads);
        let out = crate::v3::spark_batch(&env, &f.src, &[c.iter().map(String::as_str).collect()]);
        for (id, r) in ids.iter().zip(out[0]["results"].as_array().unwrap()) {
            assert!(
                !spark_result_rows(r).iter().any(|row| holds_subject(row)),
                "{t} snapshot {id} holds the subject (Spark)"
            );
        }
    }
    // PyIceberg reads the format 2 table's refs as Spark does.
    let py = {
        let out = Command::new(python())
            .arg(interop_dir().join("make_history_fixture.py"))
            .args([
                "read",
                &f.src.display().to_string(),
                "lethe",
                "finance.ledger2",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let py_refs = ref_rows(&py["finance.ledger2"]);
    for (name, rows) in &after["finance.ledger2"].0 {
        assert_eq!(
            py_refs[name].len(),
            rows.len(),
            "PyIceberg reads ref {name} as Spark"
        );
        assert!(!py_refs[name].iter().any(|r| holds_subject(r)));
    }
}

/// `lethe erase` of the subject as `request` in `f`, as a child process with `failpoints`.
fn erase_child(f: &Fixture, request: &str, failpoints: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lethe"))
        .args([
            "erase",
            "--subject",
            &format!("customer={SUBJECT}"),
            "--request",
            request,
            "--min-age",
            "0",
        ])
        .current_dir(&f.home)
        .env_remove("LETHE_CONFIG")
        .env("LETHE_REGISTER_KEY", KEY)
        .env("FAILPOINTS", failpoints)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap()
}

/// A table as a reader sees it: each ref's rows, and how many snapshots it keeps.
type Seen = (BTreeMap<String, Vec<Vec<Value>>>, usize);

/// Each table's refs with their rows, and how many snapshots each keeps: what a reader of the
/// warehouse sees (snapshot ids differ between runs; rows must not).
fn seen(f: &Fixture) -> BTreeMap<String, Seen> {
    let v = f.read();
    v.as_object()
        .unwrap()
        .iter()
        .map(|(t, x)| {
            (
                t.clone(),
                (ref_rows(x), x["snapshots"].as_object().unwrap().len()),
            )
        })
        .collect()
}

/// Stopped after each durable step in turn (a panic at the failpoint, the process gone), and
/// once inside the rewrite between its plan and its commit, then run again: the end state is an
/// uninterrupted run's — every ref the same rows, the same number of kept snapshots.
#[tokio::test(flavor = "multi_thread")]
async fn a_crash_at_any_step_of_a_history_rewrite_resumes_to_the_same_end_state() {
    let clean = Fixture::pyiceberg();
    let crashed = Fixture::pyiceberg();
    for f in [&clean, &crashed] {
        f.allow_rewrite();
    }
    let out = erase_child(&clean, "erasure-0001", "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = erase_child(
        &crashed,
        "erasure-0001",
        "twins-planned/finance.ledger=panic",
    );
    assert_eq!(
        out.status.code(),
        Some(101),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut crashes = 1;
    loop {
        let out = erase_child(&crashed, "erasure-0001", "erase-durable-step=panic");
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
        assert!(crashes < 100, "the erasure never finishes");
    }
    // The first run stopped inside the rewrite (after planned and registered); the steps run
    // together, so a stop at one's record can find the others landed: at least one more stop.
    assert!(crashes >= 2, "stopped {crashes} time(s)");
    assert_eq!(seen(&crashed), seen(&clean));
}
