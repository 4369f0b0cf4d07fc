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

// Issue 43, item 4: probes that can see. A search index rebuilt nightly from learning.events
// (an SQLite FTS5 table, or a PostgreSQL table with a tsvector column) holding the learner's
// ID as an integer; a store whose probe can't see the learner; random ID types.

/// The warehouse table the test indexes are rebuilt from.
const EVENTS: &str = "learning.events";
/// The SQLite FTS5 index, relative to the demo folder.
const FTS_DB: &str = "search/events.db";
/// The variable holding the PostgreSQL index's connection URI.
const EVENTS_PG_ENV: &str = "LETHE_TEST_EVENTS_PG";

/// One document of the test indexes: (event_id, learner_id, course_id, kind).
type Doc = (i64, i64, i64, String);

/// The documents of learning.events as they are now (a fresh workspace: the CLI changed the
/// catalog).
async fn event_documents(dir: &std::path::Path) -> Vec<Doc> {
    use arrow::array::AsArray;
    use arrow::datatypes::{DataType, Int64Type};
    let ws = lethe::workspace::Workspace::open(
        &lethe::config::Config::load(&dir.join("lethe.toml")).unwrap(),
    )
    .unwrap();
    let name = lethe_iceberg::catalog::TableName::parse(EVENTS).unwrap();
    let t = ws.warehouse.load(&name).await.unwrap();
    let rows = lethe_iceberg::ops::rewrite::select_rows(
        &ws.warehouse,
        &t,
        &lethe_iceberg::predicate::Predicate::True,
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    for b in &rows {
        let int = |c: &str| {
            let a = arrow::compute::cast(b.column_by_name(c).unwrap(), &DataType::Int64).unwrap();
            a.as_primitive::<Int64Type>().clone()
        };
        let kind =
            arrow::compute::cast(b.column_by_name("kind").unwrap(), &DataType::Utf8).unwrap();
        let kind = kind.as_string::<i32>();
        let (e, l, c) = (int("event_id"), int("learner_id"), int("course_id"));
        for i in 0..b.num_rows() {
            out.push((
                e.value(i),
                l.value(i),
                c.value(i),
                kind.value(i).to_string(),
            ));
        }
    }
    out
}

fn fts(dir: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.join(FTS_DB)).unwrap()
}

/// The nightly rebuild of the SQLite FTS5 index over learning.events, as the issue's messages
/// index is built: every document again, the IDs written as integers (an FTS5 column has no
/// type: it keeps what it is given), a row appended to index_builds. Returns the documents.
async fn rebuild_fts(dir: &std::path::Path) -> usize {
    let docs = event_documents(dir).await;
    std::fs::create_dir_all(dir.join("search")).unwrap();
    let mut c = fts(dir);
    let tx = c.transaction().unwrap();
    tx.execute_batch(
        "CREATE VIRTUAL TABLE IF NOT EXISTS events_fts USING fts5(event_id UNINDEXED, learner_id UNINDEXED, course_id UNINDEXED, kind);
         CREATE TABLE IF NOT EXISTS index_builds (built_at TEXT NOT NULL, documents INTEGER NOT NULL);
         DELETE FROM events_fts;",
    )
    .unwrap();
    insert_fts(&tx, &docs);
    tx.execute(
        "INSERT INTO index_builds VALUES (?1, ?2)",
        rusqlite::params![chrono::Utc::now().to_rfc3339(), docs.len() as i64],
    )
    .unwrap();
    tx.commit().unwrap();
    docs.len()
}

fn insert_fts(c: &rusqlite::Connection, docs: &[Doc]) {
    let mut stmt = c
        .prepare("INSERT INTO events_fts (event_id, learner_id, course_id, kind) VALUES (?1, ?2, ?3, ?4)")
        .unwrap();
    for d in docs {
        stmt.execute(rusqlite::params![d.0, d.1, d.2, d.3]).unwrap();
    }
}

/// The learner's documents in the FTS5 index (read with an integer, as the index holds it).
fn fts_docs(dir: &std::path::Path, learner: i64) -> Vec<Doc> {
    let c = fts(dir);
    let mut stmt = c
        .prepare(
            "SELECT event_id, learner_id, course_id, kind FROM events_fts WHERE learner_id = ?1",
        )
        .unwrap();
    stmt.query_map([learner], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn fts_total(dir: &std::path::Path) -> i64 {
    fts(dir)
        .query_row("SELECT count(*) FROM events_fts", [], |r| r.get(0))
        .unwrap()
}

/// The first learner with exactly `n` events (the index's view of learning.events).
fn learner_with_sqlite(dir: &std::path::Path, n: i64) -> i64 {
    fts(dir)
        .query_row(
            "SELECT learner_id FROM events_fts GROUP BY learner_id HAVING count(*) = ?1 ORDER BY learner_id LIMIT 1",
            [n],
            |r| r.get(0),
        )
        .unwrap()
}

/// governance/stores.toml registering the FTS5 index, its subject field set to `field`.
fn fts_store(field: &str) -> String {
    format!(
        r#"[stores.event_search]
kind = "index"
owner = "learning team"
description = "full-text search over learning events, rebuilt nightly"
engine = "sqlite"
path = "{FTS_DB}"
table = "events_fts"
builds_table = "index_builds"
subject_field = "{field}"
rebuilt_from = "{EVENTS}"
schedule = "nightly (the test's rebuild)"
"#
    )
}

fn store_step<'a>(j: &'a Value, name: &str) -> &'a Value {
    j["stores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["store"] == name)
        .unwrap_or_else(|| panic!("no store {name} in {j:#}"))
}

fn erase_args(learner: i64) -> Vec<String> {
    [
        "erase".to_string(),
        "--subject".into(),
        format!("learner={learner}"),
        "--request".into(),
        "erasure-0001".into(),
        "--min-age".into(),
        "0".into(),
    ]
    .to_vec()
}

/// True when `text` holds `n` as a whole number (not inside a longer one).
fn holds_number(text: &str, n: i64) -> bool {
    text.split(|c: char| !c.is_ascii_digit())
        .any(|w| w == n.to_string())
}

/// Regression (issue 43, item 4): an SQLite FTS5 index whose documents hold the learner's ID as
/// an integer. FTS5 columns have no declared type, so lethe bound the ID as text, matched
/// nothing, reported 0 records deleted and 0 residual, and called the index verified after the
/// rebuild with all 14 documents still searchable; `register replay` "repaired" a restore by
/// deleting 0 and the next check still found them. Now the erasure deletes the 14 (the probe
/// before saw 14, the probe after 0), the index is verified only after a rebuild, and after a
/// restore `register check` finds the 14, replay deletes them and says repaired because the
/// check after it finds nothing, and the next check finds nothing.
#[tokio::test(flavor = "multi_thread")]
async fn an_fts5_index_holding_integer_ids_is_erased_and_replayed_not_reported_clean() {
    let demo = Demo::new().await;
    rebuild_fts(&demo.dir).await;
    std::fs::write(
        demo.dir.join("governance/stores.toml"),
        fts_store("learner_id"),
    )
    .unwrap();
    let learner = learner_with_sqlite(&demo.dir, 14);
    let saved = fts_docs(&demo.dir, learner);
    assert_eq!(saved.len(), 14);
    let total = fts_total(&demo.dir);
    let args = erase_args(learner);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = demo.lethe_ok(&args, 0);
    assert!(
        out.contains("pending rebuild from learning.events"),
        "{out}"
    );
    let j = journal(&demo, "erasure-0001");
    let s = store_step(&j, "event_search");
    assert_eq!(s["records"]["erasure-0001"], 14, "{s:#}");
    assert_eq!(s["residual"]["erasure-0001"], 0, "{s:#}");
    assert_eq!(s["probed_before"]["erasure-0001"], 14, "{s:#}");
    assert_eq!(s["state"], "pending_rebuild", "{s:#}");
    assert_eq!(
        fts_docs(&demo.dir, learner),
        vec![],
        "none of them is searchable"
    );
    assert_eq!(
        fts_total(&demo.dir),
        total - 14,
        "the others' documents are kept"
    );
    // Verified only after a rebuild (from learning.events, erased first).
    let v = demo.lethe_ok(&["verify", "--request", "erasure-0001"], 1);
    assert!(v.contains("waiting for its next rebuild"), "{v}");
    rebuild_fts(&demo.dir).await;
    let v: Value =
        serde_json::from_str(&demo.lethe_ok(&["verify", "--request", "erasure-0001", "--json"], 0))
            .unwrap();
    assert_eq!(v["probed"][0]["store"], "event_search", "{v:#}");
    assert_eq!(v["probed"][0]["now"], "verified", "{v:#}");
    assert_eq!(fts_docs(&demo.dir, learner), vec![]);
    // A restore of the index from before the erasure: the 14 documents are back.
    insert_fts(&fts(&demo.dir), &saved);
    let check: Value =
        serde_json::from_str(&demo.lethe_ok(&["register", "check", "--json"], 1)).unwrap();
    let found: Vec<&Value> = check
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["store"] == "event_search")
        .collect();
    assert_eq!(found.len(), 1, "{check:#}");
    assert_eq!(found[0]["rows"], 14, "{check:#}");
    let r: Value = serde_json::from_str(
        &demo.lethe_ok(&["register", "replay", "--min-age", "0", "--json"], 0),
    )
    .unwrap();
    let store = &r["stores"][0];
    assert_eq!(store["store"], "event_search", "{r:#}");
    assert_eq!(store["records"], 14, "{r:#}");
    assert_eq!(store["found_again"], 0, "{r:#}");
    assert_eq!(r["repaired"], true, "{r:#}");
    assert_eq!(fts_docs(&demo.dir, learner), vec![]);
    let again = demo.lethe_ok(&["register", "check"], 0);
    assert!(again.contains("no table or store holds"), "{again}");
    let text = serde_json::to_string(&r).unwrap() + &serde_json::to_string(&check).unwrap();
    assert!(
        !holds_number(&text, learner),
        "reports hold counts, never the ID"
    );
}

/// Regression (issue 43, item 4): a store whose probe can't see the learner — its
/// subject_field names a column that never holds a learner ID, while learning.events, which
/// it is rebuilt from, held the learner's 14 rows — is BLIND: `lethe erase` stops naming it,
/// the journal says blind with the counts of what each path saw (never a value), nothing calls
/// it verified (`verify` leaves it, the attestation is INCOMPLETE naming it); with the config
/// fixed, rerunning resumes there, checks again, deletes the 14 and verifies it after the
/// rebuild.
#[tokio::test(flavor = "multi_thread")]
async fn a_store_whose_probe_cant_see_the_subject_is_blind_never_verified_and_resumes_once_fixed() {
    let demo = Demo::new().await;
    rebuild_fts(&demo.dir).await;
    let stores = demo.dir.join("governance/stores.toml");
    std::fs::write(&stores, fts_store("kind")).unwrap();
    let learner = learner_with_sqlite(&demo.dir, 14);
    // explain probes without deleting and says beforehand what the erasure will find.
    let plan: Value = serde_json::from_str(&demo.lethe_ok(
        &[
            "explain",
            "--subject",
            &format!("learner={learner}"),
            "--json",
        ],
        1,
    ))
    .unwrap();
    assert_eq!(plan["verdict"], "INCOMPLETE", "{plan:#}");
    assert!(
        plan["warnings"]
            .to_string()
            .contains("store event_search: blind"),
        "{plan:#}"
    );
    let args = erase_args(learner);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = demo.lethe(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("store event_search: blind:"),
        "names the store and says it is blind: {stderr}"
    );
    assert!(
        stderr.contains("lethe erase --resume erasure-0001"),
        "{stderr}"
    );
    let j = journal(&demo, "erasure-0001");
    let s = store_step(&j, "event_search");
    assert_eq!(s["state"], "blind", "{s:#}");
    let why = s["error"].as_str().unwrap();
    assert!(
        why.contains("its probe finds 0 record(s) of the subject of erasure-0001")
            && why.contains("learning.events, which it is rebuilt from, held 14 row(s)"),
        "{why}"
    );
    assert!(!holds_number(why, learner) && !holds_number(&stderr, learner));
    assert_eq!(s["probed_before"]["erasure-0001"], 0, "{s:#}");
    assert_eq!(s["deletes"], 0, "{s:#}");
    assert!(s["verified_at"].is_null(), "{s:#}");
    assert_eq!(
        fts_docs(&demo.dir, learner).len(),
        14,
        "nothing was deleted"
    );
    // Nothing calls it verified: not verify, not the attestation.
    let v = demo.lethe_ok(&["verify", "--request", "erasure-0001"], 1);
    assert!(!v.contains("-> verified"), "{v}");
    assert_eq!(
        store_step(&journal(&demo, "erasure-0001"), "event_search")["state"],
        "blind"
    );
    let a: Value = serde_json::from_str(&demo.lethe_ok(
        &[
            "attest",
            "--request",
            "erasure-0001",
            "--json",
            "--keep-case-file",
        ],
        1,
    ))
    .unwrap();
    assert_eq!(a["verdict"]["logical"], "INCOMPLETE", "{a:#}");
    let system = a["manifest"]["systems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["system"] == "event_search")
        .unwrap();
    assert!(
        system["state"].as_str().unwrap().starts_with("blind"),
        "{system}"
    );
    assert!(
        a["verdict"]["remaining"]
            .to_string()
            .contains("event_search"),
        "{a:#}"
    );
    // The config fixed: the rerun resumes at the store, checks again and deletes.
    std::fs::write(&stores, fts_store("learner_id")).unwrap();
    demo.lethe_ok(&["erase", "--resume", "erasure-0001"], 0);
    let j = journal(&demo, "erasure-0001");
    let s = store_step(&j, "event_search");
    assert_eq!(s["state"], "pending_rebuild", "{s:#}");
    assert_eq!(s["probed_before"]["erasure-0001"], 14, "{s:#}");
    assert_eq!(s["records"]["erasure-0001"], 14, "{s:#}");
    assert!(s["error"].is_null(), "{s:#}");
    assert_eq!(fts_docs(&demo.dir, learner), vec![]);
    rebuild_fts(&demo.dir).await;
    demo.lethe_ok(&["verify", "--request", "erasure-0001"], 0);
    assert_eq!(
        store_step(&journal(&demo, "erasure-0001"), "event_search")["state"],
        "verified"
    );
}

/// The PostgreSQL full-text index over learning.events: documents with an integer user_id and
/// a tsvector column, rebuilt from the warehouse (all documents again, a row appended to
/// index_builds).
async fn rebuild_pg(dir: &std::path::Path, uri: &str) -> usize {
    let docs = event_documents(dir).await;
    let (c, conn) = tokio_postgres::connect(uri, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    c.batch_execute(
        "CREATE TABLE IF NOT EXISTS messages (
             event_id bigint PRIMARY KEY,
             user_id integer NOT NULL,
             course_id integer NOT NULL,
             body text NOT NULL,
             tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED);
         CREATE INDEX IF NOT EXISTS messages_tsv ON messages USING gin (tsv);
         CREATE TABLE IF NOT EXISTS index_builds (built_at timestamptz NOT NULL);
         TRUNCATE messages;",
    )
    .await
    .unwrap();
    insert_pg(&c, &docs).await;
    c.execute("INSERT INTO index_builds VALUES (now())", &[])
        .await
        .unwrap();
    docs.len()
}

async fn insert_pg(c: &tokio_postgres::Client, docs: &[Doc]) {
    let ids: Vec<i64> = docs.iter().map(|d| d.0).collect();
    let users: Vec<i32> = docs.iter().map(|d| d.1 as i32).collect();
    let courses: Vec<i32> = docs.iter().map(|d| d.2 as i32).collect();
    let bodies: Vec<String> = docs.iter().map(|d| format!("event {}", d.3)).collect();
    c.execute(
        "INSERT INTO messages (event_id, user_id, course_id, body) \
         SELECT * FROM unnest($1::bigint[], $2::int[], $3::int[], $4::text[])",
        &[&ids, &users, &courses, &bodies],
    )
    .await
    .unwrap();
}

/// Regression (issue 43, item 4): a PostgreSQL full-text index (a tsvector column, an integer
/// user_id) as an `index` store: the probe before the delete sees the learner's 14 documents,
/// the delete removes exactly them, the probe after finds 0, the store is verified after the
/// rebuild; after a restore, replay deletes the 14 and is repaired only because the check after
/// it finds nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_postgres_full_text_index_with_integer_user_ids_is_probed_and_deleted_by_its_type() {
    let uri = pg_database().await;
    let demo = Demo::new().await;
    rebuild_pg(&demo.dir, &uri).await;
    std::fs::write(
        demo.dir.join("governance/stores.toml"),
        format!(
            r#"[stores.event_search]
kind = "index"
owner = "learning team"
description = "full-text search over learning events (PostgreSQL tsvector), rebuilt nightly"
engine = "postgres"
url_env = "{EVENTS_PG_ENV}"
table = "messages"
builds_table = "index_builds"
subject_field = "user_id"
rebuilt_from = "{EVENTS}"
schedule = "nightly (the test's rebuild)"
"#
        ),
    )
    .unwrap();
    let env = [(EVENTS_PG_ENV, uri.as_str())];
    let (c, conn) = tokio_postgres::connect(&uri, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let learner: i32 = c
        .query_one(
            "SELECT user_id FROM messages GROUP BY user_id HAVING count(*) = 14 ORDER BY user_id LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let docs_of = async |c: &tokio_postgres::Client| -> i64 {
        c.query_one(
            "SELECT count(*) FROM messages WHERE user_id = $1",
            &[&learner],
        )
        .await
        .unwrap()
        .get(0)
    };
    let searchable = async |c: &tokio_postgres::Client| -> i64 {
        c.query_one(
            "SELECT count(*) FROM messages WHERE tsv @@ to_tsquery('simple', 'event') AND user_id = $1",
            &[&learner],
        )
        .await
        .unwrap()
        .get(0)
    };
    assert_eq!(searchable(&c).await, 14, "the full-text search finds them");
    let total: i64 = c
        .query_one("SELECT count(*) FROM messages", &[])
        .await
        .unwrap()
        .get(0);
    let saved: Vec<Doc> = c
        .query(
            "SELECT event_id, user_id::bigint, course_id::bigint, substr(body, 7) FROM messages WHERE user_id = $1",
            &[&learner],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let args = erase_args(learner as i64);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = demo.lethe_env(&args, &env, 0);
    assert!(
        out.contains("pending rebuild from learning.events"),
        "{out}"
    );
    let j = journal(&demo, "erasure-0001");
    let s = store_step(&j, "event_search");
    assert_eq!(s["records"]["erasure-0001"], 14, "{s:#}");
    assert_eq!(s["residual"]["erasure-0001"], 0, "{s:#}");
    assert_eq!(s["probed_before"]["erasure-0001"], 14, "{s:#}");
    assert_eq!(s["state"], "pending_rebuild", "{s:#}");
    assert_eq!((docs_of(&c).await, searchable(&c).await), (0, 0));
    let left: i64 = c
        .query_one("SELECT count(*) FROM messages", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, total - 14, "the others' documents are kept");
    demo.lethe_env(&["verify", "--request", "erasure-0001"], &env, 1);
    rebuild_pg(&demo.dir, &uri).await;
    demo.lethe_env(&["verify", "--request", "erasure-0001"], &env, 0);
    assert_eq!(
        store_step(&journal(&demo, "erasure-0001"), "event_search")["state"],
        "verified"
    );
    // A restore: the documents are back; the replay deletes them and the check after it finds
    // nothing.
    insert_pg(&c, &saved).await;
    let check: Value =
        serde_json::from_str(&demo.lethe_env(&["register", "check", "--json"], &env, 1)).unwrap();
    assert!(
        check
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["store"] == "event_search" && i["rows"] == 14),
        "{check:#}"
    );
    let r: Value = serde_json::from_str(&demo.lethe_env(
        &["register", "replay", "--min-age", "0", "--json"],
        &env,
        0,
    ))
    .unwrap();
    assert_eq!(r["stores"][0]["records"], 14, "{r:#}");
    assert_eq!(r["stores"][0]["found_again"], 0, "{r:#}");
    assert_eq!(r["repaired"], true, "{r:#}");
    assert_eq!(docs_of(&c).await, 0);
    demo.lethe_env(&["register", "check"], &env, 0);
}

/// The seed of the randomized store tests: `LETHE_STORES_SEED` when set, else a fresh one;
/// always printed.
fn stores_seed() -> u64 {
    let seed = std::env::var("LETHE_STORES_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed: {seed} (set LETHE_STORES_SEED={seed} to replay)");
    seed
}

/// IDs the randomized tests draw from: integers (small, large, negative, zero) and text.
fn id_pool(text_ids: bool) -> Vec<String> {
    let mut v: Vec<String> = (1..=24).map(|i| (1000 + i * 7).to_string()).collect();
    v.extend(["0", "-5", "2147483000", "7"].map(String::from));
    if text_ids {
        v.extend(["u-17", "ab", "x9", "1007a"].map(String::from));
    }
    v
}

/// The column types of one round: every type once, shuffled, and up to two more at random.
fn round_types(rng: &mut rand::rngs::StdRng, types: &[&'static str]) -> Vec<&'static str> {
    use rand::Rng;
    use rand::seq::SliceRandom;
    let mut v = types.to_vec();
    for _ in 0..rng.random_range(0..=2) {
        v.push(types[rng.random_range(0..types.len())]);
    }
    v.shuffle(rng);
    v
}

/// Random subjects over `pool`: 1 to 5, one of them with two values, no value shared.
fn random_subjects(
    rng: &mut rand::rngs::StdRng,
    pool: &[String],
) -> Vec<lethe::stores::StoreSubject> {
    use rand::Rng;
    use rand::seq::SliceRandom;
    let mut ids = pool.to_vec();
    ids.shuffle(rng);
    let n = rng.random_range(1..=5);
    let mut out = Vec::new();
    for i in 0..n {
        let mut values = vec![ids.pop().unwrap()];
        if i == 0 && rng.random_bool(0.5) {
            values.push(ids.pop().unwrap());
        }
        out.push(lethe::stores::StoreSubject {
            request: format!("r-{i}"),
            values,
            traces: Vec::new(),
        });
    }
    out
}

/// Rows per value of each table, read back directly.
type Truth = BTreeMap<String, BTreeMap<String, u64>>;

/// Each subject's rows over every table of `truth`.
fn expected(subjects: &[lethe::stores::StoreSubject], truth: &Truth) -> Vec<u64> {
    subjects
        .iter()
        .map(|s| {
            truth
                .values()
                .map(|t| {
                    s.values
                        .iter()
                        .map(|v| t.get(v).copied().unwrap_or(0))
                        .sum::<u64>()
                })
                .sum()
        })
        .collect()
}

/// After a delete of `subjects`: their values are gone, every other value is as before.
fn check_deleted(subjects: &[lethe::stores::StoreSubject], before: &Truth, after: &Truth) {
    let gone: std::collections::BTreeSet<&String> =
        subjects.iter().flat_map(|s| s.values.iter()).collect();
    for (table, counts) in before {
        for (v, n) in counts {
            let left = after[table].get(v).copied().unwrap_or(0);
            if gone.contains(v) {
                assert_eq!(left, 0, "{table}: a subject's value is left");
            } else {
                assert_eq!(left, *n, "{table}: another subject's rows changed");
            }
        }
    }
}

/// The value an SQLite cell holds, as text: an integer's digits, a REAL holding an integer as
/// that integer, text as it is.
fn lite_text(v: rusqlite::types::ValueRef<'_>) -> Option<String> {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) if f.fract() == 0.0 => Some((f as i64).to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
    }
}

fn lite_truth(db: &std::path::Path, tables: &[String]) -> Truth {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut out = Truth::new();
    for t in tables {
        let mut counts = BTreeMap::new();
        let mut stmt = c.prepare(&format!("SELECT ref FROM \"{t}\"")).unwrap();
        let mut rows = stmt.query([]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            if let Some(v) = lite_text(r.get_ref(0).unwrap()) {
                *counts.entry(v).or_default() += 1;
            }
        }
        out.insert(t.clone(), counts);
    }
    out
}

/// Randomized (issue 43, item 4): SQLite tables whose ID column is declared INTEGER, TEXT, with
/// no type, NUMERIC, BLOB, VARCHAR, REAL or BIGINT, plus an FTS5 table, holding each ID as an
/// integer or as text at random: for random subjects, a `database` store over the tables and an
/// `index` store over the FTS5 table probe exactly the subjects' rows (and see them by text
/// too), and their deletes remove exactly those rows and leave every other row, as read back
/// with rusqlite.
#[tokio::test(flavor = "multi_thread")]
async fn random_id_types_in_sqlite_are_probed_and_deleted_exactly() {
    use rand::{Rng, SeedableRng};
    let seed = stores_seed();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    const TYPES: &[&str] = &[
        "INTEGER",
        "TEXT",
        "",
        "NUMERIC",
        "BLOB",
        "VARCHAR(20)",
        "REAL",
        "BIGINT",
    ];
    for round in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("random.db");
        let c = rusqlite::Connection::open(&db).unwrap();
        let pool = id_pool(true);
        let mut tables = Vec::new();
        let mut types = Vec::new();
        for (i, ty) in round_types(&mut rng, TYPES).into_iter().enumerate() {
            c.execute_batch(&format!(
                "CREATE TABLE t{i} (id INTEGER PRIMARY KEY, ref {ty}, note TEXT)"
            ))
            .unwrap();
            tables.push(format!("t{i}"));
            types.push(ty);
        }
        c.execute_batch(
            "CREATE VIRTUAL TABLE docs USING fts5(ref UNINDEXED, note);
             CREATE TABLE builds (built_at TEXT NOT NULL);",
        )
        .unwrap();
        let write = |table: &str, rng: &mut rand::rngs::StdRng| {
            for _ in 0..rng.random_range(20..80) {
                let v = &pool[rng.random_range(0..pool.len())];
                let value = if rng.random_bool(0.1) {
                    rusqlite::types::Value::Null
                } else {
                    match v.parse::<i64>() {
                        Ok(i) if rng.random_bool(0.5) => rusqlite::types::Value::Integer(i),
                        _ => rusqlite::types::Value::Text(v.clone()),
                    }
                };
                c.execute(
                    &format!("INSERT INTO \"{table}\" (ref, note) VALUES (?1, 'a note')"),
                    [value],
                )
                .unwrap();
            }
        };
        for t in &tables {
            write(t, &mut rng);
        }
        write("docs", &mut rng);
        drop(c);
        eprintln!("round {round}: column types {types:?} and an FTS5 table");
        let mut toml = String::from(
            "[stores.random_db]\nkind = \"database\"\nowner = \"test\"\nengine = \"sqlite\"\npath = \"random.db\"\nsubject_field = \"ref\"\n",
        );
        for t in &tables {
            toml.push_str(&format!("[[stores.random_db.tables]]\ntable = \"{t}\"\n"));
        }
        toml.push_str(
            "[stores.random_fts]\nkind = \"index\"\nowner = \"test\"\nengine = \"sqlite\"\npath = \"random.db\"\ntable = \"docs\"\nbuilds_table = \"builds\"\nsubject_field = \"ref\"\nrebuilt_from = \"app.docs\"\nschedule = \"never (a test)\"\n",
        );
        std::fs::write(dir.path().join("stores.toml"), toml).unwrap();
        let reg = lethe::stores::registry::load(dir.path()).unwrap();
        let real = types.contains(&"REAL");
        for (name, covered, exact_text) in [
            ("random_db", tables.clone(), !real),
            ("random_fts", vec!["docs".to_string()], true),
        ] {
            let store = lethe::stores::open(dir.path(), name, &reg.value.stores[name]).unwrap();
            let subjects = random_subjects(&mut rng, &pool);
            let before = lite_truth(&db, &covered);
            let want = expected(&subjects, &before);
            assert_eq!(store.probe(&subjects).await.unwrap(), want, "{name}: probe");
            // By text alone, a REAL column's 1007.0 doesn't read as 1007: fewer, never more.
            let seen = store.sight(&subjects).await.unwrap().unwrap();
            if exact_text {
                assert_eq!(seen, want, "{name}: sight");
            } else {
                assert!(
                    seen.iter().zip(&want).all(|(s, w)| s <= w),
                    "{name}: sight {seen:?} {want:?}"
                );
            }
            let d = store.delete(&subjects).await.unwrap();
            assert_eq!(d.records, want, "{name}: records deleted");
            check_deleted(&subjects, &before, &lite_truth(&db, &covered));
            assert_eq!(
                store.probe(&subjects).await.unwrap(),
                vec![0; subjects.len()],
                "{name}: probe after"
            );
        }
    }
}

/// Randomized (issue 43, item 4): PostgreSQL tables whose ID column is integer, bigint, text,
/// varchar, char, numeric or numeric(12,2): for random subjects, a `database` store probes
/// exactly the subjects' rows and its delete removes exactly them, every other row unchanged,
/// as read back with tokio-postgres (a numeric(12,2) holds 1007 as 1007.00: still the
/// subject's).
#[tokio::test(flavor = "multi_thread")]
async fn random_id_types_in_postgres_are_probed_and_deleted_exactly() {
    use rand::{Rng, SeedableRng};
    let seed = stores_seed();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let uri = pg_database().await;
    let (c, conn) = tokio_postgres::connect(&uri, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    const TYPES: &[&str] = &[
        "integer",
        "bigint",
        "text",
        "varchar(20)",
        "char(12)",
        "numeric",
        "numeric(12,2)",
    ];
    let var = "LETHE_TEST_RANDOM_STORES_PG";
    // The URI reaches the store as configuration, never through the process environment
    // (changing it while other tests' threads read it is undefined behaviour).
    let vars = |name: &str| (name == var).then(|| uri.clone());
    for round in 0..4 {
        let mut tables = Vec::new();
        let mut types = Vec::new();
        for (i, ty) in round_types(&mut rng, TYPES).into_iter().enumerate() {
            let t = format!("r{round}_t{i}");
            c.batch_execute(&format!(
                "CREATE TABLE {t} (id serial PRIMARY KEY, ref {ty}, note text)"
            ))
            .await
            .unwrap();
            let texts = ty.contains("text") || ty.contains("char");
            let pool = id_pool(texts);
            let rows: Vec<Option<String>> = (0..rng.random_range(20..80))
                .map(|_| {
                    (!rng.random_bool(0.1)).then(|| pool[rng.random_range(0..pool.len())].clone())
                })
                .collect();
            c.execute(
                &format!("INSERT INTO {t} (ref, note) SELECT v::{ty}, 'a note' FROM unnest($1::text[]) AS v"),
                &[&rows],
            )
            .await
            .unwrap();
            tables.push(t);
            types.push(ty);
        }
        eprintln!("round {round}: column types {types:?}");
        let dir = tempfile::tempdir().unwrap();
        let mut toml = format!(
            "[stores.random_db]\nkind = \"database\"\nowner = \"test\"\nengine = \"postgres\"\nurl_env = \"{var}\"\nsubject_field = \"ref\"\n"
        );
        for t in &tables {
            toml.push_str(&format!("[[stores.random_db.tables]]\ntable = \"{t}\"\n"));
        }
        std::fs::write(dir.path().join("stores.toml"), toml).unwrap();
        let reg = lethe::stores::registry::load(dir.path()).unwrap();
        let store = lethe::stores::open_with(
            dir.path(),
            "random_db",
            &reg.value.stores["random_db"],
            &vars,
        )
        .unwrap();
        let truth = async |c: &tokio_postgres::Client| {
            let mut out = Truth::new();
            for t in &tables {
                let mut counts = BTreeMap::new();
                for r in c
                    .query(
                        &format!("SELECT ref::text FROM {t} WHERE ref IS NOT NULL"),
                        &[],
                    )
                    .await
                    .unwrap()
                {
                    let v: String = r.get(0);
                    // numeric(12,2) reads 1007.00: the value 1007.
                    let v = match v.split_once('.') {
                        Some((i, f)) if f.bytes().all(|b| b == b'0') => i.to_string(),
                        _ => v,
                    };
                    *counts.entry(v).or_default() += 1;
                }
                out.insert(t.clone(), counts);
            }
            out
        };
        let subjects = random_subjects(&mut rng, &id_pool(true));
        let before = truth(&c).await;
        let want = expected(&subjects, &before);
        assert_eq!(store.probe(&subjects).await.unwrap(), want, "probe");
        let d = store.delete(&subjects).await.unwrap();
        assert_eq!(d.records, want, "records deleted");
        check_deleted(&subjects, &before, &truth(&c).await);
        assert_eq!(
            store.probe(&subjects).await.unwrap(),
            vec![0; subjects.len()],
            "probe after"
        );
    }
}
