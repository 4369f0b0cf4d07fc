//! Issue 43: no verdict claims more than is true. Each test rebuilds a situation where a verdict
//! once claimed more than was true, on a warehouse PyIceberg wrote
//! (tests/interop/make_verdict_fixtures.py), and checks the verdict with a reader that shares
//! nothing with lethe (PyIceberg, time travel to every snapshot a table keeps).

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::{Folder, interop_dir, pyiceberg, python};

const KEY: &str = "verdicts-test-register-key-0123456789abcdef";

/// A PyIceberg warehouse (`src`, catalog name `lethe`) and a lethe folder over it.
struct Fixture {
    _dir: tempfile::TempDir,
    src: PathBuf,
    folder: Folder,
    home: PathBuf,
    info: Value,
}

const SUBJECTS: &str = r#"[customer]
identifiers = ["crm.customers.customer_id"]
mapped = [{ column = "email", via = "crm.customers" }]
values = ["email", "full_name"]

[customer.not_identifying]
"support.tickets.body" = "a customer's tickets go with their rows; mentions elsewhere are found by the customer's values"
"#;

const METADATA: &str = r#"[tables."crm.customers"]
key = ["customer_id"]
[tables."crm.customers".columns]
email = "personal"
full_name = "personal"

[tables."web.sessions".columns]
session_id = { classification = "personal", identifies = "customer", derived = { from = "customer_id", pattern = "a-{id}#*" } }
anonymous_id = { classification = "personal", identifies = "customer", derived = { from = "customer_id", pattern = "a-{id}" } }

[tables."support.tickets"]
key = ["ticket_id"]
[tables."support.tickets".columns]
body = "personal"
"#;

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        let out = Command::new(python())
            .arg(interop_dir().join("make_verdict_fixtures.py"))
            .arg(&src)
            .arg("lethe")
            .output()
            .expect("run python");
        assert!(
            out.status.success(),
            "make_verdict_fixtures.py failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let info: Value = serde_json::from_slice(&out.stdout).unwrap();
        let home = dir.path().join("lethe");
        let folder = Folder::init(&home, &src, KEY);
        std::fs::write(home.join("governance/subjects.toml"), SUBJECTS).unwrap();
        std::fs::write(home.join("governance/metadata.toml"), METADATA).unwrap();
        Fixture {
            _dir: dir,
            src,
            folder,
            home,
            info,
        }
    }

    fn lethe(&self, args: &[&str]) -> Output {
        self.folder.lethe(args)
    }

    fn run(&self, args: &[&str], code: i32) -> String {
        self.folder.run(args, code)
    }

    fn json(&self, args: &[&str], code: i32) -> Value {
        self.folder.json(args, code)
    }

    fn subject(&self) -> String {
        self.info["subject"].as_str().unwrap().to_string()
    }

    /// Every snapshot `table` keeps, read with PyIceberg.
    fn snapshots(&self, table: &str) -> Vec<(i64, bool, Vec<Value>)> {
        let v = pyiceberg(&self.src, "read_snapshots.py", &[table], None);
        v[table]
            .as_object()
            .unwrap()
            .iter()
            .map(|(id, s)| {
                (
                    id.parse().unwrap(),
                    s["current"].as_bool().unwrap(),
                    s["rows"].as_array().unwrap().clone(),
                )
            })
            .collect()
    }

    /// Rows of `table` that address `customer` by any of its columns, in each kept snapshot.
    fn addressing(&self, table: &str, customer: &str) -> Vec<(i64, usize)> {
        self.snapshots(table)
            .into_iter()
            .map(|(id, _, rows)| (id, rows.iter().filter(|r| addresses(r, customer)).count()))
            .collect()
    }
}

/// Whether a row (as text) addresses `customer`: its ID in customer_id, `a-ID` in
/// anonymous_id, `a-ID#...` in session_id. Written apart from lethe's matching.
fn addresses(row: &Value, customer: &str) -> bool {
    let col = |c: &str| row.get(c).and_then(Value::as_str);
    col("customer_id") == Some(customer)
        || col("anonymous_id") == Some(&format!("a-{customer}"))
        || col("session_id").is_some_and(|s| s.starts_with(&format!("a-{customer}#")))
}

fn lines(v: &Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|x| x.as_str().unwrap_or_default().to_string())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The first situation: a table erased by one of its two identifier columns left the row whose
/// chosen column was null. Now the plan selects by both (OR), the row is gone from every
/// snapshot PyIceberg can read, the proof searched for the subject's session ids, and a
/// mention in another customer's ticket is reviewed (kept, with a basis) before the request
/// can close — `explain` said so beforehand, and the attestation lists the decision.
#[tokio::test(flavor = "multi_thread")]
async fn a_row_addressed_only_by_its_second_identifier_is_erased_and_a_reviewed_mention_closes_the_request()
 {
    let f = Fixture::new();
    let subject = f.subject();
    let arg = format!("customer={subject}");
    assert!(
        f.addressing("web.sessions", &subject)
            .iter()
            .all(|(_, n)| *n > 0)
    );

    // explain: both columns select the sessions, and it warns about the mention.
    let plan = f.json(&["explain", "--subject", &arg, "--json"], 1);
    let sessions = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["table"] == "web.sessions")
        .unwrap();
    let mut cols = vec![sessions["column"].as_str().unwrap().to_string()];
    for a in sessions["also"].as_array().unwrap() {
        cols.push(a["column"].as_str().unwrap().to_string());
    }
    cols.sort();
    assert_eq!(cols, ["anonymous_id", "session_id"], "{sessions:#}");
    assert_eq!(plan["plan_verdict"], "COMPLETE", "{plan:#}");
    assert_eq!(plan["verdict"], "INCOMPLETE", "{plan:#}");
    let warnings = lines(&plan["warnings"]);
    assert!(
        warnings.contains("support.tickets: 1 row(s) of other people quote the subject"),
        "{warnings}"
    );
    assert_eq!(
        plan["warnings"].as_array().unwrap().len(),
        1,
        "nothing else stands in the way: {warnings}"
    );

    let erased = f.json(
        &[
            "erase",
            "--subject",
            &arg,
            "--request",
            "erasure-0001",
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
        .find(|s| s["table"] == "web.sessions")
        .unwrap();
    assert_eq!(step["rows"], 3, "{step:#}");
    assert_eq!(step["checked_rows"], 3, "{step:#}");
    // The logical check after the cleanup: nothing left in any kept snapshot.
    for t in erased["journal"]["logical"].as_array().unwrap() {
        for s in t["snapshots"].as_array().unwrap() {
            if t["table"] != "support.tickets" {
                assert_eq!(s["rows"], 0, "{t:#}");
            }
        }
    }

    // PyIceberg: no snapshot of any table holds a row of the subject; the other customer's
    // session without an anonymous id is still there.
    for t in ["web.sessions", "crm.customers", "support.tickets"] {
        for (id, n) in f.addressing(t, &subject) {
            assert_eq!(n, 0, "{t} snapshot {id} still holds the subject");
        }
    }
    let other = f.info["other"].as_str().unwrap();
    let current = f
        .snapshots("web.sessions")
        .into_iter()
        .find(|(_, c, _)| *c)
        .unwrap();
    assert_eq!(
        current
            .2
            .iter()
            .filter(|r| r["session_id"] == format!("a-{other}#2") && r["anonymous_id"].is_null())
            .count(),
        1
    );
    assert_eq!(
        current.2.len() as u64,
        f.info["rows"]["web.sessions"].as_u64().unwrap() - 3
    );

    // The case file searched for every session id, and the scan finds none.
    let case: Value = serde_json::from_str(
        &std::fs::read_to_string(f.home.join("state/cases/erasure-0001.case.json")).unwrap(),
    )
    .unwrap();
    let mut ids: Vec<&str> = case["ids"]["session_id"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    ids.sort();
    let mut want: Vec<&str> = f.info["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    want.sort();
    assert_eq!(ids, want);

    // Attest: the mention keeps it from COMPLETE, says why, and the manifest keeps rows and
    // files apart.
    let a = f.json(
        &[
            "attest",
            "--request",
            "erasure-0001",
            "--json",
            "--keep-case-file",
        ],
        1,
    );
    assert_eq!(a["verdict"]["logical"], "COMPLETE", "{a:#}");
    assert_eq!(a["verdict"]["physical"], "PENDING", "{a:#}");
    let remaining = lines(&a["verdict"]["remaining"]);
    assert!(
        remaining.contains("1 mention(s) of the subject in support.tickets wait for review"),
        "{remaining}"
    );
    let tickets = a["manifest"]["systems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["system"] == "support.tickets")
        .unwrap();
    assert_eq!(tickets["residual"], 0, "{tickets:#}");
    assert_eq!(tickets["residual_files"], 1, "{tickets:#}");
    assert_ne!(a["manifest"]["status"], "COMPLETE");

    // Review: the mention is listed; recording it redacted is refused (it still quotes the
    // subject); kept, with a basis, is recorded.
    let key = format!("ticket_id={}", f.info["mention_ticket"]);
    let pending = f.json(&["review", "--request", "erasure-0001", "--json"], 1);
    let mentions = pending[0]["mentions"].as_array().unwrap();
    assert_eq!(mentions.len(), 1, "{pending:#}");
    assert_eq!(mentions[0]["table"], "support.tickets");
    assert_eq!(mentions[0]["row"], key.as_str());
    assert!(mentions[0]["decision"].is_null());
    let refused = f.lethe(&[
        "review",
        "decide",
        "--request",
        "erasure-0001",
        "--table",
        "support.tickets",
        "--row",
        &key,
        "--decision",
        "redacted",
        "--role",
        "privacy officer",
    ]);
    assert_ne!(refused.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("still mentions the subject"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let no_basis = f.lethe(&[
        "review",
        "decide",
        "--request",
        "erasure-0001",
        "--table",
        "support.tickets",
        "--row",
        &key,
        "--decision",
        "kept",
        "--role",
        "privacy officer",
    ]);
    assert_eq!(no_basis.status.code(), Some(2));
    f.run(
        &[
            "review",
            "decide",
            "--request",
            "erasure-0001",
            "--table",
            "support.tickets",
            "--row",
            &key,
            "--decision",
            "kept",
            "--basis",
            "another customer's own complaint, kept as their record",
            "--role",
            "privacy officer",
            "--day",
            "2026-12-07",
        ],
        0,
    );
    let pending = f.json(&["review", "--request", "erasure-0001", "--json"], 0);
    assert_eq!(pending[0]["mentions"][0]["decision"]["outcome"], "kept");

    // Now the request closes: both verdicts, the manifest COMPLETE, the decision listed.
    let a = f.json(&["attest", "--request", "erasure-0001", "--json"], 0);
    assert_eq!(a["verdict"]["logical"], "COMPLETE", "{a:#}");
    assert_eq!(a["verdict"]["physical"], "FILES REMOVED", "{a:#}");
    assert_eq!(a["manifest"]["status"], "COMPLETE", "{a:#}");
    assert_eq!(a["reviews"][0]["row"], key.as_str());
    assert_eq!(a["reviews"][0]["role"], "privacy officer");
    assert_eq!(
        a["reviews"][0]["basis"],
        "another customer's own complaint, kept as their record"
    );
    assert!(!a["kept_after_review"].as_array().unwrap().is_empty());
    let evidence = a.to_string();
    assert!(!evidence.contains(&subject) && !evidence.contains("mailbox-example"));
}

/// The logical check reads every snapshot a table keeps with its own reader: a row of the
/// subject planted after the erasure in a snapshot only time travel reaches (PyIceberg appends
/// it with a session id the erasure never saw, then deletes it) makes the attestation
/// INCOMPLETE, naming the table, the snapshot and the column.
#[tokio::test(flavor = "multi_thread")]
async fn a_leftover_planted_in_a_kept_snapshot_makes_the_attestation_incomplete() {
    let f = Fixture::new();
    let subject = f.subject();
    f.run(
        &[
            "erase",
            "--subject",
            &format!("customer={subject}"),
            "--request",
            "erasure-0001",
            "--min-age",
            "0",
        ],
        0,
    );
    let key = format!("ticket_id={}", f.info["mention_ticket"]);
    f.run(
        &[
            "review",
            "decide",
            "--request",
            "erasure-0001",
            "--table",
            "support.tickets",
            "--row",
            &key,
            "--decision",
            "not-the-subject",
            "--role",
            "privacy officer",
        ],
        0,
    );
    let row = serde_json::json!({
        "session_id": format!("a-{subject}#9"),
        "anonymous_id": null,
        "page": "/planted",
    });
    let planted = pyiceberg(
        &f.src,
        "plant_row.py",
        &["web.sessions", "session_id"],
        Some(&row.to_string()),
    );
    let holding = planted["holding"].as_i64().unwrap();
    assert!(
        f.addressing("web.sessions", &subject)
            .contains(&(holding, 1))
    );
    let a = f.json(
        &[
            "attest",
            "--request",
            "erasure-0001",
            "--json",
            "--keep-case-file",
        ],
        1,
    );
    assert_eq!(a["verdict"]["logical"], "INCOMPLETE", "{a:#}");
    let remaining = lines(&a["verdict"]["remaining"]);
    assert!(
        remaining.contains(&format!(
            "web.sessions: 1 row(s) of the subject in kept snapshot {holding} (by session_id: 1)"
        )),
        "{remaining}"
    );
    let sessions = a["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == "web.sessions")
        .unwrap();
    assert_eq!(sessions["residual"]["rows"], 0, "{sessions:#}");
    assert_eq!(sessions["residual"]["rows_in_older_snapshots"], 1);
    assert_eq!(sessions["residual"]["older_snapshots_holding"], 1);
}

/// The fourth situation: another process appends and deletes rows of the table (PyIceberg,
/// retrying lost races as its users do) every 50-300 ms while lethe erases one customer after
/// another. lethe's commits lose races and replan; the history purge decides what to expire
/// from the table as its final commit finds it, so no snapshot the table keeps holds an erased
/// customer; and none of the writer's rows is lost.
#[tokio::test(flavor = "multi_thread")]
async fn a_writer_committing_beside_the_erasure_loses_nothing_and_leaves_no_snapshot_holding_the_subject()
 {
    let f = Fixture::new();
    let seed = crate::common::seed(43);
    let stop = f.home.join("stop-writer");
    let writer = Command::new(python())
        .arg(interop_dir().join("busy_writer.py"))
        .arg(f.src.join("catalog.db"))
        .arg(f.src.join("warehouse"))
        .arg("lethe")
        .arg("web.sessions")
        .arg(&stop)
        .arg(seed.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the writer");
    let rounds: usize = std::env::var("LETHE_WRITER_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let mut erased = Vec::new();
    for round in 0..rounds {
        let customer = format!("CGB{:07}", 110 + round);
        std::thread::sleep(std::time::Duration::from_millis(
            150 + (seed + round as u64 * 97) % 400,
        ));
        let request = format!("erasure-{round:04}");
        erase_until_done(&f, &customer, &request);
        erased.push(customer.clone());
        for (id, n) in f.addressing("web.sessions", &customer) {
            assert_eq!(
                n, 0,
                "round {round} (seed {seed}): snapshot {id} still holds {customer}"
            );
        }
    }
    std::fs::write(&stop, b"").unwrap();
    let out = writer.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the writer failed (seed {seed}):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let w: Value = serde_json::from_slice(&out.stdout).unwrap();
    let appended: Vec<&str> = w["appended"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let deleted: Vec<&str> = w["deleted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(appended.len() > 5, "the writer hardly wrote: {w}");
    let (_, _, rows) = f
        .snapshots("web.sessions")
        .into_iter()
        .find(|(_, c, _)| *c)
        .unwrap();
    let current: Vec<&str> = rows
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    for s in &appended {
        let n = current.iter().filter(|c| *c == s).count();
        let want = usize::from(!deleted.contains(s));
        assert_eq!(n, want, "the writer's {s} (seed {seed}): {n} in the table");
    }
    for c in &erased {
        for (id, n) in f.addressing("web.sessions", c) {
            assert_eq!(n, 0, "seed {seed}: snapshot {id} holds {c}");
        }
    }
    let others = f.info["rows"]["web.sessions"].as_u64().unwrap() as usize - 3 * erased.len();
    assert_eq!(
        current.iter().filter(|s| !s.starts_with("a-W")).count(),
        others,
        "seed {seed}"
    );
}

/// The history purge carried by the erasure's commit decides what to expire from the table as
/// the final commit attempt finds it: here another writer (PyIceberg) commits, more than a
/// second after the erasure planned, a snapshot made from the table before the erasure (so it
/// holds the subject's sessions); the erasure's commit loses the race, replans, and expires
/// that snapshot too. (An instant taken once before the retries kept it: time travel read the
/// subject's rows from a snapshot the attestation called clean.)
#[tokio::test(flavor = "multi_thread")]
async fn the_history_purge_judges_the_snapshots_another_writer_committed_while_it_retried() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let f = Fixture::new();
    let subject = f.subject();
    let key_file = f.home.join("register.key");
    std::fs::write(&key_file, KEY).unwrap();
    {
        // (a key file open to group or others is refused)
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let ws = lethe::workspace::Workspace::open(
        &lethe::config::Config::load(&f.home.join("lethe.toml")).unwrap(),
    )
    .unwrap();
    let fired = Arc::new(AtomicBool::new(false));
    let (f2, src) = (fired.clone(), f.src.clone());
    fail::cfg_callback("row-rewrite-planned/web.sessions", move || {
        if !f2.swap(true, Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(1500));
            pyiceberg(
                &src,
                "append_rows.py",
                &["web.sessions"],
                Some("{\"session_id\": \"a-W0000001#1\", \"anonymous_id\": \"a-W0000001\", \"page\": \"/late\"}\n"),
            );
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
            id: subject.clone(),
        }],
        &opts,
        &|_| {},
    )
    .await;
    fail::remove("row-rewrite-planned/web.sessions");
    r.unwrap();
    assert!(fired.load(Ordering::SeqCst), "the other writer ran");
    for (id, n) in f.addressing("web.sessions", &subject) {
        assert_eq!(n, 0, "snapshot {id} still holds the subject");
    }
    let (_, _, rows) = f
        .snapshots("web.sessions")
        .into_iter()
        .find(|(_, c, _)| *c)
        .unwrap();
    assert_eq!(
        rows.iter()
            .filter(|r| r["session_id"] == "a-W0000001#1")
            .count(),
        1,
        "the other writer's row is kept"
    );
}

/// Erases `customer`, rerunning the request while another writer keeps winning the races
/// (each rerun resumes from the journal), as an operator would.
fn erase_until_done(f: &Fixture, customer: &str, request: &str) {
    let arg = format!("customer={customer}");
    let mut last = None;
    for _ in 0..8 {
        let out = f.lethe(&["erase", "--subject", &arg, "--request", request]);
        if out.status.success() {
            return;
        }
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            err.contains("kept changing") || err.contains("conflict"),
            "erase {request} failed otherwise: {err}"
        );
        last = Some(err);
    }
    panic!("erase {request} never finished: {last:?}");
}
