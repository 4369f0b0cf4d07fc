//! Issue 15: every store that holds the person — the application database (PostgreSQL, the
//! test server scripts/test.sh starts), the evaluation set in Git, the rebuilt search index,
//! the helpdesk vendor's API — deleted sources first, probed, re-probed after rebuilds, and
//! accounted for in one manifest; restores replay the register; the registry's completeness.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use lethe_demo::platform::appdb::{APP_DB_URL_ENV, AppDb};
use lethe_demo::platform::vendor::Faults;
use lethe_demo::platform::{evalset, search};
use serde_json::Value;

use crate::common::Demo;

const LEARNER: i64 = 3590;

/// A fresh database on the test PostgreSQL server; its URI.
async fn pg_database() -> String {
    let base = std::env::var("LETHE_PG_URI").unwrap_or_else(|_| {
        panic!("LETHE_PG_URI is not set: run the tests with `bash scripts/test.sh`, which starts PostgreSQL")
    });
    let (c, conn) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
        .await
        .expect("connect to the test PostgreSQL");
    tokio::spawn(conn);
    let name = format!("lethe_{}", uuid::Uuid::new_v4().simple());
    c.batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create database");
    let (head, _) = base.rsplit_once('/').expect("a URI with a database");
    format!("{head}/{name}")
}

async fn pg_count(uri: &str, sql: &str) -> i64 {
    let (c, conn) = tokio_postgres::connect(uri, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    c.query_one(sql, &[]).await.unwrap().get(0)
}

fn journal(demo: &Demo, request: &str) -> Value {
    let p = demo.dir.join(format!("state/erasures/{request}.json"));
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Every object of the repository, loose and packed, as `git cat-file --batch-all-objects
/// --batch` prints them (headers and contents).
fn all_objects(repo: &std::path::Path) -> String {
    let out = Command::new("git")
        .args(["cat-file", "--batch-all-objects", "--batch", "--unordered"])
        .current_dir(repo)
        .output()
        .expect("git cat-file (git must be installed)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn email_of(demo: &Demo, learner: i64) -> String {
    let c = rusqlite::Connection::open(demo.dir.join("app/app.db")).unwrap();
    c.query_row(
        "SELECT email FROM learners WHERE learner_id = ?1",
        [learner],
        |r| r.get(0),
    )
    .unwrap()
}

/// Done when 1 and 5: on the demo with PostgreSQL as the application database, the learner is
/// erased from every system, sources first; the Git repository holds no object with the case
/// (every object read); the index holds the learner until the rebuild after the erasure; the
/// vendor received the deletion; the manifest lists every system verified with residual 0.
#[tokio::test(flavor = "multi_thread")]
async fn the_demo_on_postgres_erases_the_learner_everywhere_sources_first() {
    let uri = pg_database().await;
    let demo = Demo::with_stores(AppDb::Postgres(Arc::new(secrecy::SecretString::from(
        uri.clone(),
    ))))
    .await;
    let vendor = demo.vendor().await;
    let env = [(APP_DB_URL_ENV, uri.as_str())];
    let email = lethe_demo_email(&uri).await;
    // Before: every system holds the learner.
    assert_eq!(
        pg_count(
            &uri,
            "SELECT count(*) FROM learners WHERE learner_id = 3590"
        )
        .await,
        1
    );
    assert_eq!(
        pg_count(&uri, "SELECT count(*) FROM tickets WHERE learner_id = 3590").await,
        1
    );
    assert_eq!(
        pg_count(
            &uri,
            "SELECT count(*) FROM payments WHERE learner_id = 3590"
        )
        .await,
        2
    );
    let payments = pg_count(&uri, "SELECT count(*) FROM payments").await;
    assert_eq!(search::documents_of(&demo.dir, LEARNER).unwrap(), 1);
    let repo = demo.dir.join(evalset::EVALSET);
    let before = all_objects(&repo);
    assert!(before.contains(evalset::DEMO_CASE) && before.contains("\"learner_id\":3590"));
    assert!(vendor.knows(&email));
    demo.lethe_env(
        &[
            "stores",
            "check",
            "--destinations",
            "governance/destinations.txt",
        ],
        &env,
        0,
    );
    // The weekly drill seeds a synthetic learner through every store, PostgreSQL's tables
    // included (parents first, one transaction), erases it and leaves each as it was.
    let counts = async || {
        let mut v = Vec::new();
        for t in ["learners", "tickets", "payments"] {
            v.push(pg_count(&uri, &format!("SELECT count(*) FROM {t}")).await);
        }
        v
    };
    let pg_before = counts().await;
    let drill: Value =
        serde_json::from_str(&demo.lethe_env(&["drill", "--min-age", "0s", "--json"], &env, 0))
            .unwrap();
    assert_eq!(drill["failures"], serde_json::json!([]), "{drill:#}");
    let app_db = drill["stores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["store"] == "app_db")
        .unwrap();
    assert_eq!(
        (app_db["seeded"].as_u64(), app_db["residual"].as_u64()),
        (Some(3), Some(0)),
        "{app_db}"
    );
    assert_eq!(counts().await, pg_before);

    let out = demo.lethe_env(
        &[
            "erase",
            "--subject",
            "learner=3590",
            "--request",
            "erasure-0001",
            "--min-age",
            "0",
        ],
        &env,
        0,
    );
    assert!(out.contains("manifest of erasure-0001"), "{out}");
    assert!(
        out.contains("pending rebuild from support.tickets"),
        "{out}"
    );
    assert!(
        !out.contains("0 value(s) of learner_id"),
        "values counted, not what is left: {out}"
    );
    // Order: the application database was deleted and probed clean before the first
    // warehouse step started.
    let j = journal(&demo, "erasure-0001");
    let app = j["stores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["store"] == "app_db")
        .unwrap();
    assert_eq!(app["before_warehouse"], true);
    assert_eq!(app["state"], "verified");
    let first_step = j["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["started_at"].as_str())
        .min()
        .unwrap()
        .to_string();
    let app_verified = app["verified_at"].as_str().unwrap();
    assert!(
        app_verified < first_step.as_str(),
        "the application database ({app_verified}) before the warehouse ({first_step})"
    );
    assert_eq!(
        app["records"]["erasure-0001"], 4,
        "1 learner + 1 ticket + 2 payments"
    );
    // PostgreSQL: the learner and the ticket deleted, the payments kept and tombstoned.
    assert_eq!(
        pg_count(
            &uri,
            "SELECT count(*) FROM learners WHERE learner_id = 3590"
        )
        .await,
        0
    );
    assert_eq!(
        pg_count(&uri, "SELECT count(*) FROM tickets WHERE learner_id = 3590").await,
        0
    );
    assert_eq!(
        pg_count(
            &uri,
            "SELECT count(*) FROM payments WHERE learner_id = 3590"
        )
        .await,
        0
    );
    assert_eq!(
        pg_count(&uri, "SELECT count(*) FROM payments").await,
        payments
    );
    assert_eq!(
        pg_count(
            &uri,
            "SELECT count(*) FROM payments WHERE learner_id IS NULL AND card_number IS NULL"
        )
        .await,
        2
    );
    // Git: no object of the repository holds the case (every object read, not `git log`).
    let after = all_objects(&repo);
    assert!(
        !after.contains(evalset::DEMO_CASE),
        "an object still holds the case"
    );
    assert!(!after.contains("\"learner_id\":3590"));
    assert!(after.contains("eval-0005"), "the other cases are kept");
    let tag = Command::new("git")
        .args(["show", "v1:cases/support.jsonl"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(tag.status.success(), "the annotated tag is re-created");
    assert!(!String::from_utf8_lossy(&tag.stdout).contains("3590"));
    let fsck = Command::new("git")
        .args(["fsck", "--full", "--strict"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
    // The vendor received the deletion; its probe finds nothing.
    assert!(vendor.received().deletes.get(&email).copied().unwrap_or(0) >= 1);
    assert!(!vendor.knows(&email));
    // The index: deleted, but pending until a rebuild after the erasure has been probed.
    assert_eq!(search::documents_of(&demo.dir, LEARNER).unwrap(), 0);
    let v = demo.lethe_env(&["verify", "--request", "erasure-0001"], &env, 1);
    assert!(v.contains("waiting for its next rebuild"), "{v}");
    demo.lethe_env(&["demo", "rebuild-index"], &env, 0);
    assert_eq!(
        search::documents_of(&demo.dir, LEARNER).unwrap(),
        0,
        "its source was erased first"
    );
    let v = demo.lethe_env(&["verify", "--request", "erasure-0001"], &env, 0);
    assert!(v.contains("rebuilt at"), "{v}");
    // The manifest: every system with records, timings and residual 0.
    let a: Value = serde_json::from_str(&demo.lethe_env(
        &["attest", "--request", "erasure-0001", "--json"],
        &env,
        0,
    ))
    .unwrap();
    let m = &a["manifest"];
    assert_eq!(m["status"], "COMPLETE", "{m:#}");
    assert!(m["certified"].is_string());
    assert_eq!(m["subject_ref"], a["subject"]["register_hash"]);
    let systems = m["systems"].as_array().unwrap();
    let names: Vec<&str> = systems
        .iter()
        .map(|s| s["system"].as_str().unwrap())
        .collect();
    for s in [
        "app_db",
        "crm.learners",
        "support.tickets",
        "helpdesk",
        "support_search",
        "eval_set",
        "crm_export",
    ] {
        assert!(names.contains(&s), "{s} missing from {names:?}");
    }
    assert_eq!(names[0], "app_db", "sources first");
    for s in systems {
        assert_eq!(s["state"], "verified", "{s:#}");
        assert_eq!(s["residual"], 0, "{s:#}");
        assert!(
            s["started"].is_string() && s["verified"].is_string(),
            "{s:#}"
        );
        assert!(s["duration_ms"].is_u64(), "{s:#}");
    }
    let rec = |n: &str| {
        systems.iter().find(|s| s["system"] == n).unwrap()["records"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(rec("app_db"), 4);
    assert_eq!(rec("eval_set"), 2, "two versions of the case in history");
    assert_eq!(rec("helpdesk"), 1);
    assert_eq!(rec("support_search"), 1);
    assert_eq!(rec("crm_export"), 1);
    let evidence = serde_json::to_string(&a).unwrap();
    assert!(
        !evidence.contains(&email) && !evidence.contains(&uri),
        "evidence holds no value or secret"
    );
}

async fn lethe_demo_email(uri: &str) -> String {
    let (c, conn) = tokio_postgres::connect(uri, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    c.query_one("SELECT email FROM learners WHERE learner_id = 3590", &[])
        .await
        .unwrap()
        .get(0)
}

/// Done when 2: a nightly reload from an application database nobody erased (restored from a
/// backup) brings the learner back; `register check` finds it, `register replay` removes it
/// and, finding nothing again afterwards, says repaired (exit 0).
#[tokio::test(flavor = "multi_thread")]
async fn a_restored_application_database_brings_the_learner_back_and_replay_removes_it() {
    let demo = Demo::with_stores(AppDb::Sqlite).await;
    let _vendor = demo.vendor().await;
    let backup = demo.dir.join("app-backup.db");
    std::fs::copy(demo.dir.join("app/app.db"), &backup).unwrap();
    demo.lethe_ok(
        &[
            "erase",
            "--subject",
            "learner=3590",
            "--request",
            "erasure-0001",
            "--min-age",
            "0",
        ],
        0,
    );
    demo.lethe_ok(&["demo", "rebuild-index"], 0);
    demo.lethe_ok(&["verify", "--request", "erasure-0001"], 0);
    demo.lethe_ok(
        &["attest", "--request", "erasure-0001", "--keep-case-file"],
        0,
    );
    demo.lethe_ok(&["register", "check"], 0);
    // The restore: the application database as it was before the erasure, then the nightly
    // reload from it.
    std::fs::copy(&backup, demo.dir.join("app/app.db")).unwrap();
    demo.lethe_ok(&["demo", "reload"], 0);
    assert_eq!(
        search::documents_of(&demo.dir, LEARNER).unwrap(),
        1,
        "the rebuild brought it back"
    );
    let incidents: Value =
        serde_json::from_str(&demo.lethe_ok(&["register", "check", "--json"], 1)).unwrap();
    let text = incidents.to_string();
    assert!(
        text.contains("\"crm.learners\"") && text.contains("\"support.tickets\""),
        "{text}"
    );
    assert!(
        text.contains("\"app_db\"") && text.contains("\"support_search\""),
        "{text}"
    );
    // Repaired (exit 0) only because the check after the deletes finds nothing again.
    let r: Value = serde_json::from_str(
        &demo.lethe_ok(&["register", "replay", "--min-age", "0", "--json"], 0),
    )
    .unwrap();
    assert_eq!(r["repaired"], true, "{r:#}");
    for f in r["stores"]
        .as_array()
        .unwrap()
        .iter()
        .chain(r["tables"].as_array().unwrap())
    {
        assert_eq!(f["found_again"], 0, "{r:#}");
    }
    let stores: BTreeMap<String, u64> = r["stores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["store"].as_str().unwrap().to_string(),
                s["records"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(stores["app_db"], 4, "learner, ticket and 2 payments: {r:#}");
    assert!(stores["support_search"] >= 1, "{r:#}");
    assert!(
        r["not_replayable"].to_string().contains("helpdesk"),
        "the vendor knows the learner by email: named, {r:#}"
    );
    assert!(
        r["cleaned_up"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "crm.learners")
    );
    demo.lethe_ok(&["register", "check"], 0);
    assert_eq!(search::documents_of(&demo.dir, LEARNER).unwrap(), 0);
    let c = rusqlite::Connection::open(demo.dir.join("app/app.db")).unwrap();
    let n: i64 = c
        .query_row(
            "SELECT count(*) FROM learners WHERE learner_id = 3590",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 0);
    // The restored copy's snapshots are gone too: the proof scan finds nothing.
    demo.lethe_ok(&["scan", "--request", "erasure-0001"], 0);
}

/// Done when 3: the vendor failing (5xx, a timeout) leaves the request open and resumable,
/// never COMPLETE; a probe that still finds the subject reopens the store and, after the
/// retries, names it. The credential comes from the environment and shows nowhere.
#[tokio::test(flavor = "multi_thread")]
async fn a_failing_vendor_leaves_the_request_open_and_resumable() {
    let demo = Demo::with_stores(AppDb::Sqlite).await;
    let vendor = demo.vendor().await;
    let token = "s3cr3t-vendor-token-0042";
    let stores = demo.dir.join("governance/stores.toml");
    let text = std::fs::read_to_string(&stores).unwrap();
    std::fs::write(
        &stores,
        text.replace(
            "timeout_seconds = 5\n",
            "timeout_seconds = 1\nauth_env = \"LETHE_TEST_VENDOR_TOKEN\"\n",
        ),
    )
    .unwrap();
    let email = email_of(&demo, LEARNER);
    let bearer = format!("Bearer {token}");
    let env = [("LETHE_TEST_VENDOR_TOKEN", bearer.as_str())];
    vendor.set_faults(Faults {
        fail_deletes: 1000,
        status: 503,
        token: Some(token.into()),
        ..Default::default()
    });
    let args = [
        "erase",
        "--subject",
        "learner=3590",
        "--request",
        "erasure-0001",
        "--min-age",
        "0",
    ];
    let out = Command::new(env!("CARGO_BIN_EXE_lethe"))
        .args(args)
        .current_dir(&demo.dir)
        .envs(env)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("store helpdesk") && stderr.contains("HTTP 503 after 3 attempt(s)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("lethe erase --resume erasure-0001"),
        "{stderr}"
    );
    assert_eq!(vendor.received().deletes[&email], 3, "three attempts");
    assert_eq!(vendor.received().unauthorized, 0, "the token was sent");
    let j = journal(&demo, "erasure-0001");
    assert!(j["finished_at"].is_null(), "the request stays open");
    let a: Value = serde_json::from_str(&demo.lethe_env(
        &[
            "attest",
            "--request",
            "erasure-0001",
            "--json",
            "--keep-case-file",
        ],
        &env,
        1,
    ))
    .unwrap();
    assert_eq!(a["verdict"]["logical"], "INCOMPLETE");
    assert!(
        a["verdict"]["remaining"].to_string().contains("helpdesk"),
        "{a:#}"
    );
    // A timeout: answers slower than the client waits.
    vendor.set_faults(Faults {
        slow_deletes: 1000,
        delay: Duration::from_secs(3),
        token: Some(token.into()),
        ..Default::default()
    });
    let out = Command::new(env!("CARGO_BIN_EXE_lethe"))
        .args(["erase", "--resume", "erasure-0001"])
        .current_dir(&demo.dir)
        .envs(env)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("timed out after 1s"), "{stderr}");
    // The vendor recovers: resuming finishes the request.
    vendor.set_faults(Faults {
        token: Some(token.into()),
        ..Default::default()
    });
    demo.lethe_env(&["erase", "--resume", "erasure-0001"], &env, 0);
    assert!(!vendor.knows(&email));
    // A vendor that acknowledges but keeps the subject: the probe reopens the store, deletes
    // again, and after the retries names it.
    vendor.set_faults(Faults {
        ignore_deletes: true,
        token: Some(token.into()),
        ..Default::default()
    });
    let users: BTreeMap<String, u64> =
        serde_json::from_str(&std::fs::read_to_string(demo.dir.join("vendor/users.json")).unwrap())
            .unwrap();
    let other_email = users.keys().next().unwrap().clone();
    let c = rusqlite::Connection::open(demo.dir.join("app/app.db")).unwrap();
    let other: i64 = c
        .query_row(
            "SELECT learner_id FROM learners WHERE email = ?1",
            [&other_email],
            |r| r.get(0),
        )
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lethe"))
        .args([
            "erase",
            "--subject",
            &format!("learner={other}"),
            "--request",
            "erasure-0002",
            "--min-age",
            "0",
        ])
        .current_dir(&demo.dir)
        .envs(env)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("store helpdesk")
            && stderr.contains("still holds 1 record(s) of the subject after 3 delete(s)"),
        "{stderr}"
    );
    assert_eq!(vendor.received().deletes[&other_email], 3);
    // The credential appears nowhere lethe writes.
    for f in walk(&demo.dir.join("state")) {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
            "{} holds the token",
            f.display()
        );
    }
    assert!(!stderr.contains(token) && !String::from_utf8_lossy(&out.stdout).contains(token));
}

fn walk(p: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            out.extend(walk(&e.unwrap().path()));
        }
    } else {
        out.push(p.to_path_buf());
    }
    out
}

/// Done when 4: a store with `probe = "none"` makes the verdict INCOMPLETE and names the store
/// and its basis; `lethe stores check` names an unregistered destination; EXPIRE, its blocker,
/// HAND_OFF, bad config.
#[tokio::test(flavor = "multi_thread")]
async fn residuals_expiry_hand_offs_and_the_registry_check() {
    let demo = Demo::new().await;
    let stores = demo.dir.join("governance/stores.toml");
    let base = r#"
[stores.backups]
kind = "backup"
owner = "ops team"
probe = "none"
basis = "technical_impossibility"
expires = "35 days after the erasure"
control = "restore_replays_erasure_log"

[stores.partner_drop]
kind = "files"
owner = "crm team"
path = "partner"
subject_field = "learner_id"
delete = "none"
retention = "7 days"

[stores.course_assistant]
kind = "model"
owner = "ml team"
trained_on = ["learning.reviews"]
"#;
    std::fs::create_dir_all(demo.dir.join("partner")).unwrap();
    // A retention past the deadline is a blocker, named, and nothing changes.
    std::fs::write(
        &stores,
        base.replace("retention = \"7 days\"", "retention = \"90 days\""),
    )
    .unwrap();
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
    assert!(
        err.contains("store partner_drop") && err.contains("after the request's deadline"),
        "{err}"
    );
    assert!(!demo.dir.join("state/erasures/erasure-0001.json").exists());
    std::fs::write(&stores, base).unwrap();
    demo.lethe_ok(
        &[
            "erase",
            "--subject",
            "learner=3590",
            "--request",
            "erasure-0001",
            "--min-age",
            "0",
        ],
        0,
    );
    let a: Value =
        serde_json::from_str(&demo.lethe_ok(&["attest", "--request", "erasure-0001", "--json"], 1))
            .unwrap();
    assert_eq!(a["verdict"]["logical"], "INCOMPLETE");
    let remaining = a["verdict"]["remaining"].to_string();
    assert!(
        remaining.contains("store backups") && remaining.contains("technical_impossibility"),
        "{remaining}"
    );
    assert!(remaining.contains("pending retention until"), "{remaining}");
    let m = &a["manifest"];
    assert_eq!(m["status"], "INCOMPLETE");
    assert_eq!(m["residuals"][0]["control"], "restore_replays_erasure_log");
    assert_eq!(m["hand_offs"][0]["artifact"], "course_assistant");
    assert_eq!(m["hand_offs"][0]["owner"], "ml team");
    assert!(
        !m["systems"].to_string().contains("course_assistant"),
        "a hand-off is never a system claimed erased"
    );
    let expire = m["systems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["system"] == "partner_drop")
        .unwrap();
    assert_eq!(expire["action"], "EXPIRE");
    // After the retention's day, `verify` probes it (the folder holds nothing of the learner).
    let until = expire["state"]
        .as_str()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_string();
    demo.lethe_ok(
        &["verify", "--request", "erasure-0001", "--day", "2000-01-01"],
        1,
    );
    let v = demo.lethe_ok(
        &[
            "verify",
            "--request",
            "erasure-0001",
            "--day",
            &until,
            "--json",
        ],
        1,
    );
    let v: Value = serde_json::from_str(&v).unwrap();
    assert_eq!(v["probed"][0]["store"], "partner_drop");
    assert_eq!(v["probed"][0]["now"], "verified");
    // Registry completeness.
    let list = demo.dir.join("destinations.txt");
    std::fs::write(
        &list,
        "# egress allowlist\nfile:partner\nhttps://errors.example/api # the error reporter\n",
    )
    .unwrap();
    let out = demo.lethe_ok(
        &["stores", "check", "--destinations", list.to_str().unwrap()],
        1,
    );
    assert!(
        out.contains("https://errors.example/api") && !out.contains("  file:partner"),
        "{out}"
    );
    // Bad config: file, line and key; nothing runs.
    std::fs::write(
        &stores,
        base.replace("kind = \"backup\"", "kind = \"tape\""),
    )
    .unwrap();
    let out = demo.lethe(&["stores", "list"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stores.toml:3: stores.backups.kind"), "{err}");
    std::fs::write(&stores, base.replace("probe = \"none\"\n", "")).unwrap();
    let err = String::from_utf8_lossy(&demo.lethe(&["stores", "list"]).stderr).to_string();
    assert!(
        err.contains("stores.backups") && err.contains("probe = \"none\""),
        "{err}"
    );
    // The old [[residuals]] in lethe.toml is refused with where it went.
    let cfg = demo.dir.join("lethe.toml");
    let good = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!(
            "{good}\n[[residuals]]\nname = \"b\"\nbasis = \"x\"\nexpires = \"y\"\ncontrol = \"z\"\n"
        ),
    )
    .unwrap();
    let err = String::from_utf8_lossy(&demo.lethe(&["stores", "list"]).stderr).to_string();
    assert!(
        err.contains("residuals") && err.contains("governance/stores.toml"),
        "{err}"
    );
}
