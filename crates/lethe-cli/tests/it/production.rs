//! Issue 14: production lakehouses against real servers — SeaweedFS's Iceberg REST catalog and
//! S3, the SQL catalog on PostgreSQL over S3, a versioned bucket. `scripts/test.sh` starts the
//! servers (docs/services.md) and exports their variables; these tests fail, never skip, when
//! they are missing. Each test uses its own namespaces, catalog names and buckets, so they run
//! in parallel on one server. Only `the_rest_catalog_end_to_end` builds the demo in the REST
//! catalog (its namespaces are fixed).
//!
//! PyIceberg 0.12 is the independent reader (tests/interop/prod_catalog.py), boto3 + pyarrow +
//! fastavro the independent scan of the bucket (tests/interop/bucket_scan.py), Spark 3.5 with
//! the Iceberg 1.10 runtime the second engine (scripts/spark_tool.py; without Java 17/11 the
//! test fails, never skips).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema};
use chrono::Duration;
use iceberg::spec::FormatVersion;
use lethe::config::{CatalogConfig, Config, StorageConfig};
use lethe::workspace::Workspace;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::clock::SystemClock;
use lethe_iceberg::ops::rewrite::{RowRewrite, append, count_rows, rewrite_rows};
use lethe_iceberg::ops::sweep::sweep;
use lethe_iceberg::predicate::{Predicate, Value};
use lethe_iceberg::writer::WriteOptions;

use crate::common::{interop_dir, python};

/// The learner the demo erases, and their identifying values (from the demo's CRM export).
pub(crate) const LEARNER: i64 = 3590;

/// A server variable `scripts/test.sh` exports.
pub(crate) fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the tests with `bash scripts/test.sh`, which starts SeaweedFS and PostgreSQL (docs/services.md)")
    })
}

pub(crate) fn suffix() -> String {
    format!("{:08x}", rand::random::<u32>())
}

/// Every secret of the test servers, by what it is.
fn secrets() -> Vec<(&'static str, String)> {
    vec![
        ("the S3 secret key", env("AWS_SECRET_ACCESS_KEY")),
        ("the S3 access key id", env("AWS_ACCESS_KEY_ID")),
        (
            "the OAuth2 client secret",
            env("LETHE_REST_OAUTH_CLIENT_SECRET"),
        ),
        ("the PostgreSQL password", env("LETHE_PG_PASSWORD")),
    ]
}

/// Fails when any secret (or a bearer token: SeaweedFS issues JWTs, `eyJ…`) is in `text`.
fn assert_no_secret(what: &str, text: &str) {
    for (name, value) in secrets() {
        assert!(
            !text.contains(&value),
            "{name} appears in {what} (value not shown)"
        );
    }
    assert!(!text.contains("eyJ"), "a bearer token appears in {what}");
    assert!(
        !text.to_ascii_lowercase().contains("bearer "),
        "an Authorization header appears in {what}"
    );
}

/// The secrets a run is given on purpose, right or wrong (issue 44, item 18: a bad-credential
/// test passes a wrong secret, and lethe must not print that either): the values of `extra`
/// variables whose names say they hold one (an OAuth2 credential `id:secret` also by its
/// secret part), and the password of any URI among `args`.
fn given_secrets(args: &[&str], extra: &[(&str, &str)]) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in extra {
        let k = k.to_ascii_uppercase();
        if ["SECRET", "PASSWORD", "TOKEN", "CREDENTIAL", "KEY"]
            .iter()
            .any(|w| k.contains(w))
        {
            out.push(v.to_string());
            if let Some((_, secret)) = v.split_once(':') {
                out.push(secret.to_string());
            }
        }
    }
    for a in args {
        if let Some((_, rest)) = a.split_once("://")
            && let Some((userinfo, _)) = rest.split('/').next().unwrap_or("").rsplit_once('@')
            && let Some((_, password)) = userinfo.split_once(':')
        {
            out.push(password.to_string());
        }
    }
    out.retain(|s| s.len() >= 6);
    out
}

/// Fails when any of `given` is in `text`.
fn assert_not_shown(what: &str, text: &str, given: &[String]) {
    for (i, s) in given.iter().enumerate() {
        assert!(
            !text.contains(s.as_str()),
            "secret #{i} given to the run appears in {what} (value not shown)"
        );
    }
}

/// Values of subjects no output may show: identifying values (emails, names, phones) in no
/// output at all; IDs in no log (stderr) — stdout may echo an ID the operator typed
/// (`erasure plan for learner=3590`). Every test here builds the same demo (seed 42), so the
/// values one test registers hold for all.
static WATCHED: std::sync::Mutex<Vec<(String, bool)>> = std::sync::Mutex::new(Vec::new());

/// Registers `learner`'s ID and identifying values (from the demo's export) as watched.
fn watch(demo: &Path, learner: i64) {
    let mut w = WATCHED.lock().unwrap();
    for v in learner_values_of(demo, learner) {
        if !w.contains(&(v.clone(), false)) {
            w.push((v, false));
        }
    }
    let id = (learner.to_string(), true);
    if !w.contains(&id) {
        w.push(id);
    }
}

/// Whether `text` holds `value` as a whole token (not inside a longer run of letters and
/// digits: the ID 3590 is in `[3590]`, not in `35901`).
fn holds_token(text: &str, value: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    text.match_indices(value).any(|(i, _)| {
        !alnum(text[..i].chars().next_back()) && !alnum(text[i + value.len()..].chars().next())
    })
}

/// Fails when `text` holds a watched value (IDs only when `log`).
fn assert_no_subject_value(what: &str, text: &str, log: bool) {
    for (value, id) in WATCHED.lock().unwrap().iter() {
        if *id && !log {
            continue;
        }
        assert!(
            !holds_token(text, value),
            "a subject's {} appears in {what} (value not shown)",
            if *id { "ID" } else { "identifying value" }
        );
    }
}

/// The REST end-to-end test's application database on PostgreSQL (a store of its demo),
/// given to every run as `LETHE_DEMO_APP_DB_URL`.
static APP_DB_URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// A fresh database on the test PostgreSQL server; its URI (with the test password).
async fn pg_database() -> String {
    let base = env("LETHE_PG_URI");
    let (c, conn) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
        .await
        .expect("connect to the test PostgreSQL");
    tokio::spawn(conn);
    let name = format!("lethe_{}", suffix());
    c.batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create database");
    let (head, _) = base.rsplit_once('/').expect("a URI with a database");
    format!("{head}/{name}")
}

/// The demo's application database on PostgreSQL, registered as a store (the demo's own
/// registration, without the stores `--warehouse-only` leaves out).
const PG_STORE: &str = r#"[warehouse."crm.learners"]
depends_on = ["app_db"]
[warehouse."support.tickets"]
depends_on = ["app_db"]
[warehouse."billing.payments"]
depends_on = ["app_db"]

[stores.app_db]
kind = "database"
owner = "platform team"
description = "the learning platform's application database"
retention = "none"
engine = "postgres"
url_env = "LETHE_DEMO_APP_DB_URL"
subject_field = "learner_id"
[[stores.app_db.tables]]
table = "learners"
[[stores.app_db.tables]]
table = "tickets"
[[stores.app_db.tables]]
table = "payments"
action = "tombstone"
erase_columns = ["card_number"]
"#;

/// How verbose a run is: the flags and the `LETHE_LOG` directive.
#[derive(Clone, Copy)]
struct Verbosity(&'static [&'static str], Option<&'static str>);

/// The most verbose lethe can be (`LETHE_LOG=trace`: every level of its own crates, other
/// crates' as far as lethe lets them go): what every run of [`lethe`] uses, so its log holds
/// whatever any `-v` would show.
const MOST: Verbosity = Verbosity(&[], Some("trace"));

/// Every verbosity: none, `-v`, `-vv`, `LETHE_LOG=trace`.
const EVERY: [Verbosity; 4] = [
    Verbosity(&[], None),
    Verbosity(&["-v"], None),
    Verbosity(&["-vv"], None),
    MOST,
];

/// Runs `lethe` in `dir` at the most verbose setting (every output and log line is checked
/// for secrets — the servers' and every one the run is given, wrong ones too — and for watched
/// subjects' values), the register key variables removed,
/// PostgreSQL's password in PGPASSWORD, and `extra` variables.
fn lethe(dir: &Path, args: &[&str], extra: &[(&str, &str)], log: &mut String) -> Output {
    lethe_at(MOST, dir, args, extra, log)
}

/// [`lethe`] at verbosity `v`.
fn lethe_at(
    v: Verbosity,
    dir: &Path,
    args: &[&str],
    extra: &[(&str, &str)],
    log: &mut String,
) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lethe"));
    cmd.args(v.0)
        .args(args)
        .current_dir(dir)
        .env_remove("LETHE_REGISTER_KEY")
        .env_remove("LETHE_CONFIG")
        .env_remove("LETHE_LOG")
        .env("PGPASSWORD", env("LETHE_PG_PASSWORD"))
        .env("NO_COLOR", "1");
    if let Some(d) = v.1 {
        cmd.env("LETHE_LOG", d);
    }
    if let Some(url) = APP_DB_URL.get() {
        cmd.env("LETHE_DEMO_APP_DB_URL", url);
    }
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run lethe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_no_secret(&format!("the output of lethe {args:?}"), &stdout);
    assert_no_secret(&format!("the log of lethe {args:?}"), &stderr);
    let given = given_secrets(args, extra);
    let shown = redact_args(args);
    assert_not_shown(&format!("the output of lethe {shown:?}"), &stdout, &given);
    assert_not_shown(&format!("the log of lethe {shown:?}"), &stderr, &given);
    assert_no_subject_value(&format!("the output of lethe {shown:?}"), &stdout, false);
    assert_no_subject_value(&format!("the log of lethe {shown:?}"), &stderr, true);
    log.push_str(&stdout);
    log.push_str(&stderr);
    out
}

/// `args` as a failure message may show them: a URI's password replaced.
fn redact_args(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| lethe::config::redact_uri(a)).collect()
}

/// The wrong secrets of the bad-credential cases are found by name and by URI.
#[test]
fn given_secrets_are_found_by_name_and_uri() {
    let g = given_secrets(
        &[
            "init",
            "--catalog",
            "postgresql://lethe:hunter2-not-shown@h:5432/db",
        ],
        &[
            ("LETHE_REST_CREDENTIAL", "nobody:wrong-secret"),
            ("AWS_SECRET_ACCESS_KEY", "wrong-secret-key"),
            ("LETHE_S3_ENDPOINT", "http://127.0.0.1:1"),
        ],
    );
    assert_eq!(
        g,
        [
            "nobody:wrong-secret",
            "wrong-secret",
            "wrong-secret-key",
            "hunter2-not-shown"
        ]
    );
}

/// As [`lethe`], asserting the exit code; returns stdout.
fn lethe_ok(dir: &Path, args: &[&str], code: i32, log: &mut String) -> String {
    let out = lethe(dir, args, &[], log);
    assert_eq!(
        out.status.code(),
        Some(code),
        "lethe {args:?} exited {:?}\nstdout:\n{}\nstderr (last lines):\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        tail(&String::from_utf8_lossy(&out.stderr), 40)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Runs one of tests/interop/*.py; returns its JSON output.
pub(crate) fn py(script: &str, args: &[&str], stdin: Option<&str>) -> serde_json::Value {
    let mut child = Command::new(python())
        .arg(interop_dir().join(script))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python");
    {
        use std::io::Write;
        let mut input = child.stdin.take().expect("stdin");
        if let Some(s) = stdin {
            input.write_all(s.as_bytes()).expect("write stdin");
        }
    }
    let out = child.wait_with_output().expect("python output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script} {args:?} failed:\n{stdout}\n{}",
        tail(&stderr, 30)
    );
    assert_no_secret(&format!("the output of {script}"), &stdout);
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{script} printed no JSON ({e}): {stdout}"))
}

/// Rows per demo table as `lethe tables --json` counts them (a shared REST catalog also holds
/// other tests' tables).
fn demo_rows(dir: &Path, log: &mut String) -> BTreeMap<String, u64> {
    let mut all = lethe_rows(dir, log);
    all.retain(|t, _| lethe_demo::platform::data::TABLES.contains(&t.as_str()));
    all
}

/// Rows per table as `lethe tables --json` counts them.
fn lethe_rows(dir: &Path, log: &mut String) -> BTreeMap<String, u64> {
    let out = lethe_ok(dir, &["tables", "--json"], 0, log);
    let v: serde_json::Value = serde_json::from_str(&out).expect("tables JSON");
    v.as_array()
        .expect("a list")
        .iter()
        .map(|t| {
            (
                t["table"].as_str().unwrap().to_string(),
                t["rows"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// PyIceberg reads every table with the rows lethe counts, and none of the learner's rows
/// where a table has a `learner_id` column (`keeps`: tables a legal exception keeps).
fn pyiceberg_reads_every_table(
    kind: &str,
    name: &str,
    expected: &BTreeMap<String, u64>,
    keeps: &[&str],
) {
    let mut all_args = vec![kind, name, "read"];
    all_args.extend(expected.keys().map(String::as_str));
    let all = py("prod_catalog.py", &all_args, None);
    let mut specs: Vec<String> = Vec::new();
    for (t, want) in expected {
        let got = &all[t];
        assert_eq!(
            got["rows"].as_u64(),
            Some(*want),
            "PyIceberg reads {t} with other rows than lethe: {got}"
        );
        let has_learner = got["columns"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "learner_id");
        if has_learner && !keeps.contains(&t.as_str()) {
            specs.push(format!("{t}?learner_id={LEARNER}"));
        }
    }
    assert!(!specs.is_empty());
    let mut args = vec![kind, name, "read"];
    args.extend(specs.iter().map(String::as_str));
    let learner = py("prod_catalog.py", &args, None);
    for s in &specs {
        assert_eq!(learner[s]["rows"], 0, "PyIceberg finds the learner in {s}");
    }
}

/// The learner's identifying values, from the demo's CRM export (before any erasure).
fn learner_values(demo: &Path) -> Vec<String> {
    learner_values_of(demo, LEARNER)
}

/// A learner's identifying values (email, full name, phone), from the demo's CRM export.
fn learner_values_of(demo: &Path, learner: i64) -> Vec<String> {
    let batches = lethe::batchio::read_batches(&demo.join("exports/crm_learners.parquet")).unwrap();
    let mut out = Vec::new();
    for b in &batches {
        let ids = b
            .column_by_name("learner_id")
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        for i in 0..b.num_rows() {
            if ids.value(i) == learner {
                for col in ["email", "full_name", "phone"] {
                    let a = b
                        .column_by_name(col)
                        .unwrap()
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .unwrap();
                    out.push(a.value(i).to_string());
                }
            }
        }
    }
    assert_eq!(out.len(), 3, "the learner is in the export");
    out
}

/// The independent scan: boto3 lists `bucket/prefix`, pyarrow and fastavro read each object.
fn independent_scan(
    bucket: &str,
    prefix: &str,
    values: &[String],
    versions: bool,
) -> serde_json::Value {
    let id = format!("learner_id={LEARNER}");
    let mut args: Vec<String> = vec![bucket.into(), prefix.into(), "--id".into(), id];
    for v in values {
        args.push("--value".into());
        args.push(v.clone());
    }
    if versions {
        args.push("--versions".into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    py("bucket_scan.py", &args, None)
}

/// Every object of `bucket/prefix` (and its noncurrent versions) is free of the secrets.
fn bucket_holds_no_secret(bucket: &str, prefix: &str) {
    for versions in [false, true] {
        let mut args = vec![bucket, prefix];
        if versions {
            args.push("--versions");
        }
        args.extend([
            "--grep-secrets",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "LETHE_REST_OAUTH_CLIENT_SECRET",
            "LETHE_PG_PASSWORD",
        ]);
        let r = py("bucket_scan.py", &args, None);
        assert_eq!(
            r["secrets_in"],
            serde_json::json!([]),
            "objects hold a secret (values not shown)"
        );
    }
}

/// Every file lethe wrote in the folder (lethe.toml, journals, case files, evidence, the
/// register, lineage) is free of the secrets.
fn folder_holds_no_secret(dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                assert_no_secret(&p.display().to_string(), &String::from_utf8_lossy(&bytes));
            }
        }
    }
}

fn attestation(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("attest printed no JSON ({e}): {out}"))
}

/// Spark 3.5 + Iceberg 1.10 through the REST catalog and s3a. Without Java 17/11 the test
/// fails ([`crate::common::spark_vars`]), never skips.
struct Spark {
    python: String,
    env: Vec<(String, String)>,
}

impl Spark {
    fn new() -> Spark {
        let env = crate::common::spark_env_from_script();
        let python = env
            .iter()
            .find(|(k, _)| k == "LETHE_SPARK_PYTHON")
            .map(|(_, v)| v.clone())
            .expect("LETHE_SPARK_PYTHON");
        Spark { python, env }
    }

    /// Runs one `batch` of commands in one session; returns one JSON value per command.
    fn batch(&self, commands: &[Vec<String>]) -> Vec<serde_json::Value> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("batch.jsonl");
        let text: String = commands
            .iter()
            .map(|c| serde_json::to_string(c).unwrap() + "\n")
            .collect();
        std::fs::write(&file, text).unwrap();
        let tool = interop_dir().join("../../scripts/spark_tool.py");
        let out = Command::new(&self.python)
            .arg(tool)
            .arg("batch")
            .arg(&file)
            .args([
                "--catalog-type",
                "rest",
                "--catalog-uri",
                &env("LETHE_REST_URI"),
                "--warehouse",
                "warehouse",
                "--rest-credential-env",
                "LETHE_REST_CREDENTIAL",
                "--s3-endpoint",
                &env("LETHE_S3_ENDPOINT"),
            ])
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .expect("run spark_tool.py");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_no_secret("spark_tool.py's output", &stdout);
        assert!(
            out.status.success(),
            "spark_tool.py batch failed:\n{stdout}\n{}",
            tail(&stderr, 30)
        );
        stdout
            .lines()
            .filter(|l| l.trim_start().starts_with('{'))
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect()
    }
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The whole job on the SeaweedFS REST catalog and S3: Spark writes partitioned cow and mor
/// tables; the demo is built; a commit answered with an unknown outcome (a 503 before the
/// server acted) leaves the erasure consistent and resumable; explain, erase, scan and attest
/// end COMPLETE; PyIceberg reads every table; the independent scan finds no object holding
/// the learner; lethe erases the learner from Spark's tables and Spark reads every table with
/// the expected rows; `lethe init` opens the catalog read-only; no output, log line at -vv,
/// file or object holds a secret.
///
/// Issue 44 item 11: the application database on PostgreSQL is a store of the run (erased
/// first), and a restriction of another learner is in force for the queries and pipelines
/// that follow the erasure; every command runs at the most verbose setting
/// (`LETHE_LOG=trace`), read-only ones at every verbosity too, and no output or log line
/// holds either learner's identifying values, no log line their IDs.
#[tokio::test(flavor = "multi_thread")]
async fn the_rest_catalog_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = tmp.path().join("demo");
    let mut log = String::new();
    let spark = Spark::new();
    let spark_ns = format!("spark_{}", suffix());
    let cow = format!("{spark_ns}.cow");
    let mor = format!("{spark_ns}.mor");
    let spark_rows = 300;
    {
        let s = &spark;
        let made = s.batch(&[
            args(&[
                "create-fixture",
                "--table",
                &cow,
                "--kind",
                "v2-cow",
                "--generate",
                "300",
                "--subject",
                &LEARNER.to_string(),
            ]),
            args(&[
                "create-fixture",
                "--table",
                &mor,
                "--kind",
                "v2-mor",
                "--generate",
                "300",
                "--subject",
                &LEARNER.to_string(),
            ]),
        ]);
        assert_eq!(made.len(), 2, "{made:?}");
        assert!(
            made[1]["files"].to_string().contains("position"),
            "{}",
            made[1]
        );
    }

    let uri = env("LETHE_REST_URI");
    let endpoint = env("LETHE_S3_ENDPOINT");
    let app_db = pg_database().await;
    APP_DB_URL
        .set(app_db.clone())
        .expect("one test sets the app database");
    let out = lethe_ok(
        tmp.path(),
        &[
            "demo",
            "init",
            "--dir",
            "demo",
            // (the warehouse and its catalog are this test's subject, and of the outside
            // stores the application database on PostgreSQL, registered below)
            "--warehouse-only",
            "--app-db",
            "postgres",
            "--catalog",
            "rest",
            "--catalog-uri",
            &uri,
            "--warehouse",
            "s3://warehouse",
            "--s3-endpoint",
            &endpoint,
            "--s3-path-style",
            "true",
            // (a fresh server has no demo tables; a developer's may hold an earlier run's)
            "--force",
            "--json",
        ],
        0,
        &mut log,
    );
    let built: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(built["tables"]["learning.events"], 100_000);
    let text = std::fs::read_to_string(demo.join("lethe.toml")).unwrap();
    assert!(text.contains("kind = \"rest\""), "{text}");
    let values = learner_values(&demo);
    watch(&demo, LEARNER);
    watch(&demo, RESTRICTED);
    std::fs::write(demo.join("governance/stores.toml"), PG_STORE).unwrap();
    let listed = lethe_ok(&demo, &["stores", "list", "--json"], 0, &mut log);
    assert!(listed.contains("app_db"), "{listed}");
    let app_rows = |learner: i64| {
        let url = app_db.clone();
        async move {
            let (c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            c.query_one(
                "SELECT count(*) FROM learners WHERE learner_id = $1",
                &[&learner],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
        }
    };
    assert_eq!(app_rows(LEARNER).await, 1);
    let before = demo_rows(&demo, &mut log);
    assert_eq!(before.len(), 13, "{before:?}");
    let seen = independent_scan("warehouse", "learning/", &values, false);
    assert!(
        !seen["holding"].as_object().unwrap().is_empty(),
        "the independent scan must see the learner before the erasure: {seen}"
    );

    // A commit the catalog never answers (503 / timeout before the server acted), every time:
    // the erasure stops with an error, the table stays as it was, nothing it wrote is deleted.
    lethe_ok(
        &demo,
        &["explain", "--subject", "learner=3590"],
        0,
        &mut log,
    );
    let reviews_before = py(
        "prod_catalog.py",
        &[
            "rest",
            "lethe",
            "read",
            "learning.reviews",
            "learning.reviews?learner_id=3590",
        ],
        None,
    );
    let failing = lethe(
        &demo,
        &[
            "erase",
            "--subject",
            "learner=3590",
            "--request",
            "erasure-0001",
            "--min-age",
            "0",
        ],
        &[(
            "FAILPOINTS",
            "catalog-commit-unknown-before/learning.reviews=return",
        )],
        &mut log,
    );
    let stderr = String::from_utf8_lossy(&failing.stderr).into_owned();
    assert_eq!(failing.status.code(), Some(2), "{}", tail(&stderr, 20));
    assert!(
        stderr.contains("learning.reviews") && stderr.contains("outcome is unknown"),
        "{}",
        tail(&stderr, 20)
    );
    let reviews_during = py(
        "prod_catalog.py",
        &[
            "rest",
            "lethe",
            "read",
            "learning.reviews",
            "learning.reviews?learner_id=3590",
        ],
        None,
    );
    assert_eq!(
        reviews_during, reviews_before,
        "the table changed although no commit was acknowledged"
    );
    // The failed attempts' files are still there (never deleted on an unknown outcome).
    let ws = Workspace::open(&Config::load(&demo.join("lethe.toml")).unwrap()).unwrap();
    let name = TableName::parse("learning.reviews").unwrap();
    let left = sweep(&ws.warehouse, &name, Duration::zero(), true, &SystemClock)
        .await
        .unwrap();
    assert!(
        left.unreferenced_count > 0,
        "the files of the unacknowledged commits were deleted"
    );
    // Resumed without the fault: COMPLETE, and the cleanup sweeps those files.
    let out = lethe_ok(&demo, &["erase", "--resume", "erasure-0001"], 0, &mut log);
    assert!(out.contains("cleanup of "), "{out}");
    let left = sweep(&ws.warehouse, &name, Duration::zero(), true, &SystemClock)
        .await
        .unwrap();
    assert_eq!(left.unreferenced_count, 0, "{:?}", left.unreferenced);

    let out = lethe_ok(&demo, &["scan", "--request", "erasure-0001"], 0, &mut log);
    assert!(out.contains("CLEAN"), "{out}");
    let att = attestation(&lethe_ok(
        &demo,
        &["attest", "--request", "erasure-0001", "--json"],
        0,
        &mut log,
    ));
    assert_eq!(att["verdict"]["logical"], "COMPLETE", "{}", att["verdict"]);
    assert_eq!(att["verdict"]["physical"], "COMPLETE", "{}", att["verdict"]);
    assert!(
        att["verdict"]["storage"]
            .as_str()
            .unwrap()
            .contains("s3 bucket warehouse"),
        "{}",
        att["verdict"]
    );
    assert!(
        att["scan"]["files_read"].as_u64().unwrap() > 50,
        "{}",
        att["scan"]
    );

    // PyIceberg through the same REST catalog and S3 endpoint.
    let after = demo_rows(&demo, &mut log);
    assert!(after["crm.learners"] < before["crm.learners"]);
    pyiceberg_reads_every_table("rest", "lethe", &after, &["billing.payments"]);
    // The independent scan: no object holds the learner, but the payments a legal exception
    // keeps (their learner_id; the learner's values are gone there too).
    let scan = independent_scan("warehouse", "", &values, false);
    assert!(scan["objects"].as_u64().unwrap() > 50, "{scan}");
    assert_eq!(scan["unreadable"], serde_json::json!({}), "{scan}");
    for (object, found) in scan["holding"].as_object().unwrap() {
        assert!(
            object.starts_with("billing/payments/data/")
                && found == &serde_json::json!(["id learner_id"]),
            "{object} holds the learner: {found}"
        );
    }

    // The application database lost the learner first (a store of the run).
    assert_eq!(app_rows(LEARNER).await, 0);
    restricted_queries_and_pipelines_log_no_value(&demo, &mut log);

    // lethe erases the learner from Spark's tables; Spark reads every table. (The demo's
    // erasure above already planned Spark's tables — discovery finds their learner_id columns
    // in the same catalog — and deleted the learner's rows there; this `lethe init` folder's
    // erasure runs over the same catalog again, and takes the payments the demo kept.)
    {
        let s = &spark;
        let cfg = tmp.path().join("spark-lethe");
        let out = lethe_ok(
            tmp.path(),
            &[
                "init",
                "--dir",
                "spark-lethe",
                "--catalog",
                &format!("rest+{uri}"),
                "--warehouse",
                "s3://warehouse",
                "--s3-endpoint",
                &endpoint,
                "--s3-path-style",
                "true",
                "--json",
            ],
            0,
            &mut log,
        );
        let init: serde_json::Value = serde_json::from_str(&out).unwrap();
        let listed: Vec<&str> = init["tables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["table"].as_str().unwrap())
            .collect();
        assert!(
            listed.contains(&cow.as_str()) && listed.contains(&"crm.learners"),
            "{listed:?}"
        );
        std::fs::write(
            cfg.join("governance/subjects.toml"),
            format!("[learner]\nidentifiers = [\"{cow}.learner_id\", \"{mor}.learner_id\"]\n"),
        )
        .unwrap();
        std::fs::write(
            cfg.join("governance/metadata.toml"),
            format!(
                "[tables.\"{cow}\".columns]\nlearner_id = {{ classification = \"internal\", identifies = \"learner\" }}\n\
                 [tables.\"{mor}\".columns]\nlearner_id = {{ classification = \"internal\", identifies = \"learner\" }}\n"
            ),
        )
        .unwrap();
        std::fs::create_dir_all(cfg.join("state")).unwrap();
        lethe::keys::write_random_key(&cfg.join("state/register.key")).unwrap();
        // subjects.toml names only Spark's tables; discovery adds every learner_id column.
        let out = lethe(
            &cfg,
            &[
                "erase",
                "--subject",
                "learner=3590",
                "--request",
                "spark-0001",
                "--min-age",
                "0",
                "--accept-incomplete",
            ],
            &[],
            &mut log,
        );
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            tail(&String::from_utf8_lossy(&out.stderr), 30)
        );
        // That folder's learner is in every table with a learner_id column (its governance
        // has no legal exception): the demo's payments lost the learner's rows too.
        let after = demo_rows(&demo, &mut log);
        let mut reads: Vec<Vec<String>> = Vec::new();
        for t in after.keys() {
            reads.push(args(&["read-table", "--table", t]));
        }
        for t in [&cow, &mor] {
            reads.push(args(&["read-table", "--table", t]));
            reads.push(args(&[
                "read-table",
                "--table",
                t,
                "--where",
                &format!("learner_id = {LEARNER}"),
            ]));
        }
        let got = s.batch(&reads);
        assert_eq!(got.len(), reads.len());
        for (i, t) in after.keys().enumerate() {
            assert_eq!(
                got[i]["row_count"].as_u64(),
                Some(after[t]),
                "Spark reads {t}: {}",
                got[i]["row_count"]
            );
        }
        let n = after.len();
        // The fixtures' pattern: the learner is on every 5th row of the first two commits;
        // cow deleted event_id % 10 = 3 below the first commit's rows, mor deleted
        // event_id % 10 = 3 everywhere (updates keep rows).
        let learner_rows = (0..spark_rows)
            .filter(|i| i % 5 == 0 && i * 3 / spark_rows < 2)
            .count() as u64;
        let first = (0..spark_rows).filter(|i| i * 3 / spark_rows == 0).count() as u64;
        let cow_left =
            spark_rows as u64 - (0..first).filter(|i| i % 10 == 3).count() as u64 - learner_rows;
        let mor_left = spark_rows as u64
            - (0..spark_rows as u64).filter(|i| i % 10 == 3).count() as u64
            - learner_rows;
        assert_eq!(
            got[n]["row_count"].as_u64(),
            Some(cow_left),
            "{}",
            got[n]["row_count"]
        );
        assert_eq!(got[n + 1]["row_count"], 0);
        assert_eq!(
            got[n + 2]["row_count"].as_u64(),
            Some(mor_left),
            "{}",
            got[n + 2]["row_count"]
        );
        assert_eq!(got[n + 3]["row_count"], 0);
        folder_holds_no_secret(&cfg);
    }

    folder_holds_no_secret(&demo);
    bucket_holds_no_secret("warehouse", "");
    assert_no_secret("every lethe output", &log);
}

/// The learner a restriction leaves out of queries and pipelines in the end-to-end test.
const RESTRICTED: i64 = 4127;

/// A restriction of [`RESTRICTED`] is opened; analysts' counts drop, EXPLAIN shows the
/// restriction's function and no value, the pipelines rerun; read-only commands run at every
/// verbosity; every output and log is checked (by [`lethe_at`]) for both learners' values.
fn restricted_queries_and_pipelines_log_no_value(demo: &Path, log: &mut String) {
    let count = "SELECT count(*) AS n FROM learning.events";
    let number = |log: &mut String| -> i64 {
        let out = lethe_ok(
            demo,
            &["query", "--as", "analyst_gb", count, "--json"],
            0,
            log,
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["rows"][0]["n"].as_i64().unwrap()
    };
    let before = number(log);
    let id = format!("learner={RESTRICTED}");
    lethe_ok(
        demo,
        &[
            "request",
            "open",
            "--kind",
            "restriction",
            "--subject",
            &id,
            "--received",
            "2026-10-01",
            "--request",
            "restriction-1",
        ],
        0,
        log,
    );
    assert!(number(log) < before, "the restriction changed no query");
    lethe_ok(demo, &["pipeline", "run", "--all"], 0, log);
    let explain = format!("EXPLAIN ANALYZE {count}");
    let read_only: [&[&str]; 6] = [
        &["tables"],
        &["query", "--as", "analyst_gb", count],
        &[
            "query",
            "--as",
            "marketing-1",
            "EXPLAIN SELECT * FROM crm.learners",
        ],
        &["query", "--as", "analyst_gb", &explain],
        &["explain", "--subject", &id],
        &["stores", "list"],
    ];
    for v in EVERY {
        for args in read_only {
            let out = lethe_at(v, demo, args, &[], log);
            assert!(
                out.status.code().is_some_and(|c| c <= 1),
                "lethe {args:?}: {}",
                tail(&String::from_utf8_lossy(&out.stderr), 20)
            );
            if args.contains(&explain.as_str()) {
                assert!(
                    String::from_utf8_lossy(&out.stdout).contains("lethe_unrestricted("),
                    "{}",
                    String::from_utf8_lossy(&out.stdout)
                );
            }
        }
    }
    // The proof scan of the restricted learner (it holds rows everywhere: exit 1).
    lethe_ok(demo, &["scan", "--subject", &id], 1, log);
    lethe_ok(
        demo,
        &["request", "lift", "restriction-1", "--day", "2026-10-20"],
        0,
        log,
    );
    assert_eq!(number(log), before);
}

/// A small table of `rows` events in a fresh namespace of the workspace's catalog: every 4th
/// row is the person's. (The column is `person_id`, not `learner_id`: the Spark part of the
/// end-to-end test erases learner 3590 from every table with a `learner_id` column.)
pub(crate) async fn events_table(
    ws: &Workspace,
    ns: &str,
    rows: std::ops::Range<i64>,
) -> TableName {
    let name = TableName::parse(&format!("{ns}.events")).unwrap();
    let schema = Arc::new(ArrowSchema::new(vec![
        Field::new("event_id", DataType::Int64, false),
        Field::new("person_id", DataType::Int64, true),
        Field::new("kind", DataType::Utf8, true),
    ]));
    let iceberg_schema = iceberg::arrow::arrow_schema_to_schema_auto_assign_ids(&schema).unwrap();
    ws.warehouse
        .create_table(
            &name,
            iceberg_schema,
            None,
            None,
            Default::default(),
            FormatVersion::V2,
        )
        .await
        .unwrap();
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.clone())),
            Arc::new(Int64Array::from_iter_values(
                rows.clone()
                    .map(|i| if i % 4 == 0 { LEARNER } else { 1000 + i }),
            )),
            Arc::new(StringArray::from_iter_values(rows.map(|i| format!("k{i}")))),
        ],
    )
    .unwrap();
    append(
        &ws.warehouse,
        &name,
        &[batch],
        Default::default(),
        WriteOptions::default(),
    )
    .await
    .unwrap();
    name
}

/// A workspace on the REST catalog (OAuth2 client credentials from LETHE_REST_CREDENTIAL).
pub(crate) fn rest_workspace(dir: &Path) -> Workspace {
    std::fs::create_dir_all(dir).unwrap();
    let catalog = CatalogConfig {
        kind: "rest".into(),
        name: "lethe".into(),
        uri: env("LETHE_REST_URI"),
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

pub(crate) fn person() -> Predicate {
    Predicate::eq("person_id", Value::Int(LEARNER))
}

/// The commit path on the REST catalog: a PyIceberg append between lethe's plan and its
/// commit gets a 409 and is replanned (no appended row lost, the learner's rows gone); a lost
/// acknowledgement is reconciled by reloading (one attempt, nothing deleted); a commit the
/// server never saw (503 before it acted) is retried and leaves that attempt's files for the
/// sweep; a catalog that keeps failing leaves the table as it was, and a rerun finishes.
#[tokio::test(flavor = "multi_thread")]
async fn rest_commits_conflict_and_unknown_outcomes() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = rest_workspace(tmp.path());
    let wh = &ws.warehouse;

    // 1. A concurrent append between plan and commit.
    let ns = format!("c{}", suffix());
    let name = events_table(&ws, &ns, 0..40).await;
    let lines: String = (5000..5010)
        .map(|i| {
            let l = if i % 2 == 0 { LEARNER } else { 7 };
            format!("{{\"event_id\": {i}, \"person_id\": {l}, \"kind\": \"appended\"}}\n")
        })
        .collect();
    let fired = Arc::new(AtomicBool::new(false));
    let f2 = fired.clone();
    let table = name.to_string();
    fail::cfg_callback(format!("row-rewrite-planned/{name}"), move || {
        if !f2.swap(true, Ordering::SeqCst) {
            py(
                "prod_catalog.py",
                &["rest", "lethe", "append", &table],
                Some(&lines),
            );
        }
    })
    .unwrap();
    let r = rewrite_rows(wh, &name, &RowRewrite::delete(person())).await;
    fail::remove(format!("row-rewrite-planned/{name}"));
    let r = r.unwrap();
    assert!(fired.load(Ordering::SeqCst), "the second writer ran");
    assert!(
        r.attempts >= 2,
        "the 409 was replanned ({} attempts)",
        r.attempts
    );
    let read = py(
        "prod_catalog.py",
        &[
            "rest",
            "lethe",
            "read",
            &name.to_string(),
            &format!("{name}?person_id={LEARNER}"),
            &format!("{name}?kind=appended"),
        ],
        None,
    );
    assert_eq!(
        read[format!("{name}?person_id={LEARNER}")]["rows"],
        0,
        "{read}"
    );
    assert_eq!(
        read[format!("{name}?kind=appended")]["rows"],
        5,
        "an appended row was lost: {read}"
    );
    assert_eq!(read[name.to_string()]["rows"], 30 + 5, "{read}");

    // 2. The acknowledgement is lost after the server committed.
    let name = events_table(&ws, &format!("u{}", suffix()), 0..20).await;
    fail::cfg(format!("catalog-commit-unknown-after/{name}"), "1*return").unwrap();
    let r = rewrite_rows(wh, &name, &RowRewrite::delete(person())).await;
    fail::remove(format!("catalog-commit-unknown-after/{name}"));
    let r = r.unwrap();
    assert_eq!(r.attempts, 1, "the reload showed the commit landed");
    let t = wh.load(&name).await.unwrap();
    assert_eq!(
        t.current_snapshot().unwrap().snapshot_id(),
        r.snapshot_id.unwrap()
    );
    for f in wh.current_files(&t).await.unwrap() {
        assert!(wh.store.exists(f.entry.data_file.file_path()).unwrap());
    }
    assert_eq!(count_rows(wh, &t, &person()).await.unwrap().0, 0);

    // 3. The server never saw the first attempt (a 503): retried; its files are kept.
    let name = events_table(&ws, &format!("n{}", suffix()), 0..20).await;
    fail::cfg(format!("catalog-commit-unknown-before/{name}"), "1*return").unwrap();
    let r = rewrite_rows(wh, &name, &RowRewrite::delete(person())).await;
    fail::remove(format!("catalog-commit-unknown-before/{name}"));
    let r = r.unwrap();
    assert_eq!(r.attempts, 2);
    let dry = sweep(wh, &name, Duration::zero(), true, &SystemClock)
        .await
        .unwrap();
    assert!(
        dry.unreferenced_count > 0,
        "the first attempt's files were deleted"
    );

    // 4. It never answers: the table is as it was; a rerun finishes.
    let name = events_table(&ws, &format!("f{}", suffix()), 0..20).await;
    let before = wh.load(&name).await.unwrap();
    fail::cfg(format!("catalog-commit-unknown-before/{name}"), "return").unwrap();
    let e = rewrite_rows(wh, &name, &RowRewrite::delete(person())).await;
    fail::remove(format!("catalog-commit-unknown-before/{name}"));
    let Err(e) = e else {
        panic!("the commit can't succeed while the catalog never answers")
    };
    let e = e.to_string();
    assert!(
        e.contains("outcome is unknown") || e.contains("kept failing"),
        "{e}"
    );
    let now = wh.load(&name).await.unwrap();
    assert_eq!(
        now.current_snapshot().map(|s| s.snapshot_id()),
        before.current_snapshot().map(|s| s.snapshot_id())
    );
    assert_eq!(count_rows(wh, &now, &person()).await.unwrap().0, 5);
    rewrite_rows(wh, &name, &RowRewrite::delete(person()))
        .await
        .unwrap();
    let now = wh.load(&name).await.unwrap();
    assert_eq!(count_rows(wh, &now, &person()).await.unwrap().0, 0);
    let read = py(
        "prod_catalog.py",
        &["rest", "lethe", "read", &name.to_string()],
        None,
    );
    assert_eq!(read[name.to_string()]["rows"], 15);
}

/// The SQL catalog on PostgreSQL over a versioned bucket: the demo is built, `lethe init`
/// opens the catalog read-only, PyIceberg's SqlCatalog on the same database reads every
/// table; after the erasure the attestation says physical purge PENDING with the number of
/// noncurrent versions holding the learner (the independent scan of the versions agrees);
/// with `purge_versions = true` and the erasure run again, no version holds them and the
/// attestation is COMPLETE.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_catalog_over_a_versioned_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = tmp.path().join("demo");
    let mut log = String::new();
    let id = suffix();
    let bucket = format!("lethe-v{id}");
    let name = format!("demo_{id}");
    let made = py(
        "bucket_scan.py",
        &["--create-bucket", &bucket, "--versioned"],
        None,
    );
    assert_eq!(made["versioning"], "Enabled");
    let pg = format!(
        "postgresql://{}@{}:{}/{}",
        env("LETHE_PG_USER"),
        env("LETHE_PG_HOST"),
        env("LETHE_PG_PORT"),
        env("LETHE_PG_DATABASE")
    );
    let warehouse = format!("s3://{bucket}/demo");
    lethe_ok(
        tmp.path(),
        &[
            "demo",
            "init",
            "--dir",
            "demo",
            "--warehouse-only",
            "--catalog",
            "postgres",
            "--catalog-uri",
            &pg,
            "--catalog-name",
            &name,
            "--warehouse",
            &warehouse,
            "--s3-path-style",
            "true",
        ],
        0,
        &mut log,
    );
    let values = learner_values(&demo);
    watch(&demo, LEARNER);
    let before = lethe_rows(&demo, &mut log);
    assert_eq!(before.len(), 13);
    pyiceberg_reads_every_table_counts("sql", &name, &before);

    // `lethe init` on the same catalog: it lists the tables and changes nothing.
    let out = lethe_ok(
        tmp.path(),
        &[
            "init",
            "--dir",
            "other",
            "--catalog",
            &pg,
            "--warehouse",
            &warehouse,
            "--name",
            &name,
            "--s3-path-style",
            "true",
            "--json",
        ],
        0,
        &mut log,
    );
    let init: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(init["tables"].as_array().unwrap().len(), 13, "{init}");
    assert!(
        init["tables"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["unreadable"].is_null()),
        "{init}"
    );
    assert_eq!(lethe_rows(&demo, &mut log), before);

    lethe_ok(
        &demo,
        &["explain", "--subject", "learner=3590"],
        0,
        &mut log,
    );
    lethe_ok(
        &demo,
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
        &mut log,
    );
    // Current objects are clean; the versions the deletes left hold the learner.
    let scan = lethe_ok(
        &demo,
        &["scan", "--request", "erasure-0001", "--json"],
        1,
        &mut log,
    );
    let scan: serde_json::Value = serde_json::from_str(&scan).unwrap();
    assert_eq!(scan["files_holding"], 0, "{}", scan["files_holding"]);
    let holding = scan["versions"]["noncurrent_holding"].as_u64().unwrap();
    assert!(holding > 0, "{}", scan["versions"]);
    let att = attestation(&lethe_ok(
        &demo,
        &["attest", "--request", "erasure-0001", "--json"],
        1,
        &mut log,
    ));
    assert_eq!(att["verdict"]["logical"], "COMPLETE", "{}", att["verdict"]);
    assert_eq!(att["verdict"]["physical"], "PENDING", "{}", att["verdict"]);
    assert_eq!(
        att["scan"]["noncurrent_versions_holding"].as_u64(),
        Some(holding)
    );
    assert!(
        att["verdict"]["remaining"]
            .to_string()
            .contains("purge_versions"),
        "{}",
        att["verdict"]
    );
    let independent = independent_scan(&bucket, "demo/", &values, true);
    assert!(
        !independent["holding"].as_object().unwrap().is_empty(),
        "the independent scan of the versions must agree: {independent}"
    );
    let after = lethe_rows(&demo, &mut log);
    pyiceberg_reads_every_table("sql", &name, &after, &["billing.payments"]);

    // purge_versions = true, and the erasure run again: the versions are deleted by id.
    let file = demo.join("lethe.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("purge_versions = false"), "{text}");
    std::fs::write(
        &file,
        text.replace("purge_versions = false", "purge_versions = true"),
    )
    .unwrap();
    let out = lethe_ok(&demo, &["erase", "--resume", "erasure-0001"], 0, &mut log);
    assert!(out.contains("noncurrent version(s) deleted"), "{out}");
    let att = attestation(&lethe_ok(
        &demo,
        &["attest", "--request", "erasure-0001", "--json"],
        0,
        &mut log,
    ));
    assert_eq!(att["verdict"]["physical"], "COMPLETE", "{}", att["verdict"]);
    assert_eq!(att["scan"]["noncurrent_versions_holding"], 0);
    assert!(att["cleanup"]["versions_purged"].as_u64().unwrap() > 0);
    let independent = independent_scan(&bucket, "demo/", &values, true);
    for (object, found) in independent["holding"].as_object().unwrap() {
        assert!(
            object.starts_with("demo/billing.db/payments/data/")
                && found == &serde_json::json!(["id learner_id"]),
            "{object} still holds the learner: {found}"
        );
    }
    let current = independent_scan(&bucket, "demo/", &values, false);
    for (object, found) in current["holding"].as_object().unwrap() {
        assert!(
            object.starts_with("demo/billing.db/payments/data/"),
            "{object}: {found}"
        );
    }
    pyiceberg_reads_every_table("sql", &name, &after, &["billing.payments"]);
    folder_holds_no_secret(&demo);
    bucket_holds_no_secret(&bucket, "");
}

/// PyIceberg reads every table with the given row counts.
fn pyiceberg_reads_every_table_counts(kind: &str, name: &str, expected: &BTreeMap<String, u64>) {
    let all = py("prod_catalog.py", &[kind, name, "read"], None);
    let got: BTreeMap<String, u64> = all
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v["rows"].as_u64().unwrap()))
        .collect();
    assert_eq!(&got, expected);
}

/// A free TCP port nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn write_config(dir: &Path, catalog: CatalogConfig, storage: StorageConfig) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let f = dir.join("lethe.toml");
    std::fs::write(&f, Config::render_with(&catalog, &storage, &[])).unwrap();
    f
}

fn fails_with(dir: &Path, args: &[&str], extra: &[(&str, &str)], wanted: &[&str]) {
    let mut log = String::new();
    let out = lethe(dir, args, extra, &mut log);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "lethe {args:?}: {}",
        tail(&stderr, 10)
    );
    let last = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("lethe: "))
        .unwrap_or_default();
    for w in wanted {
        assert!(
            last.contains(w),
            "lethe {args:?}: `{w}` not in the error: {last}"
        );
    }
}

/// Bad input is a clear error naming what failed, and changes nothing: an unreachable
/// catalog, wrong catalog and storage credentials, a bucket that doesn't exist, a table
/// whose location is outside the warehouse's bucket, a password in a catalog URI.
#[tokio::test(flavor = "multi_thread")]
async fn bad_production_input_is_named_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = StorageConfig {
        endpoint: Some(env("LETHE_S3_ENDPOINT")),
        path_style: Some(true),
        ..Default::default()
    };
    let rest = |uri: String| CatalogConfig {
        kind: "rest".into(),
        name: "lethe".into(),
        uri,
        warehouse: "s3://warehouse".into(),
        ..Default::default()
    };
    // An unreachable catalog.
    let port = closed_port();
    let d = tmp.path().join("unreachable");
    write_config(
        &d,
        rest(format!("http://127.0.0.1:{port}")),
        storage.clone(),
    );
    fails_with(
        &d,
        &["tables"],
        &[],
        &[&format!("can't reach REST catalog http://127.0.0.1:{port}")],
    );
    // A wrong OAuth2 client credential.
    let d = tmp.path().join("wrong-credential");
    write_config(&d, rest(env("LETHE_REST_URI")), storage.clone());
    fails_with(
        &d,
        &["tables"],
        &[("LETHE_REST_CREDENTIAL", "nobody:wrong-secret")],
        &["refused the client credentials", "invalid_client"],
    );
    // A wrong S3 secret key.
    fails_with(
        &d,
        &["tables"],
        &[("AWS_SECRET_ACCESS_KEY", "wrong-secret-key")],
        &["refused the credentials for bucket `warehouse`"],
    );
    // A bucket that doesn't exist.
    let d = tmp.path().join("no-bucket");
    let missing = format!("lethe-missing-{}", suffix());
    let sqlite = |warehouse: String| CatalogConfig {
        kind: "sql".into(),
        name: "lethe".into(),
        uri: "sqlite:catalog.db".into(),
        warehouse,
        ..Default::default()
    };
    write_config(&d, sqlite(format!("s3://{missing}/wh")), storage.clone());
    fails_with(
        &d,
        &["tables"],
        &[],
        &[&format!("s3 bucket `{missing}` does not exist")],
    );
    assert!(
        !d.join("catalog.db").exists(),
        "a catalog was created for a missing bucket"
    );

    // A table whose location is outside the warehouse's bucket.
    let d = tmp.path().join("outside");
    let prefix = format!("outside-{}", suffix());
    let f = write_config(&d, sqlite(format!("s3://lethe/{prefix}")), storage.clone());
    let ws = Workspace::open(&Config::load(&f).unwrap()).unwrap();
    let inside = events_table(&ws, "shop", 0..8).await;
    let t = ws.warehouse.load(&inside).await.unwrap();
    let mut json: serde_json::Value =
        serde_json::from_slice(&ws.warehouse.store.read(&t.metadata_location).unwrap()).unwrap();
    json["location"] = serde_json::json!("s3://elsewhere/shop/orders");
    let foreign = format!("s3://lethe/{prefix}/shop.db/orders/metadata/00000-x.metadata.json");
    ws.warehouse
        .store
        .write_new(&foreign, &serde_json::to_vec(&json).unwrap())
        .unwrap();
    lethe_iceberg::catalog::SqlCatalog::open("lethe", &d.join("catalog.db"))
        .unwrap()
        .register_table(&TableName::parse("shop.orders").unwrap(), &foreign)
        .await
        .unwrap();
    let listing = |ws: &Workspace| -> Vec<String> {
        ws.warehouse
            .store
            .list(&format!("s3://lethe/{prefix}/"))
            .unwrap()
            .map(|f| f.unwrap().location)
            .collect()
    };
    let objects = listing(&ws);
    fails_with(
        &d,
        &["sweep", "shop.orders", "--min-age", "0"],
        &[],
        &[
            "s3://elsewhere/shop/orders",
            "outside the warehouse's bucket `lethe`",
        ],
    );
    assert_eq!(listing(&ws), objects, "an object changed");

    // A password in a catalog URI is refused before anything is written.
    let d = tmp.path().join("password");
    std::fs::create_dir_all(&d).unwrap();
    fails_with(
        &d,
        &[
            "init",
            "--catalog",
            "postgresql://lethe:hunter2-not-shown@127.0.0.1:5432/lethe",
            "--warehouse",
            "s3://lethe/x",
        ],
        &[],
        &["don't put the password"],
    );
    assert!(
        std::fs::read_dir(&d).unwrap().next().is_none(),
        "init wrote a file"
    );
}
