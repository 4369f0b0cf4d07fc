//! Consent that changes the next query (issue 7): consent states, the enforced query path with
//! row filters and keyed pseudonyms, the audit log, and stale consent-built tables.

use std::collections::BTreeSet;

use lethe::access::audit::{AuditLog, Decision, sql_hash};
use lethe::access::policy::PseudonymKey;
use lethe::access::query::PseudonymUdf;
use serde_json::Value;

use crate::common::Demo;

const COUNT: &str = "SELECT count(*) AS n FROM crm.learners";

/// Runs `lethe query --as P SQL --json` and returns the rows (exit 0 expected).
fn rows(demo: &Demo, principal: &str, sql: &str) -> Vec<Value> {
    let out = demo.lethe_ok(&["query", "--as", principal, sql, "--json"], 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    v["rows"].as_array().unwrap().clone()
}

/// The single number a one-row, one-column query returns.
fn number(demo: &Demo, principal: &str, sql: &str) -> i64 {
    let r = rows(demo, principal, sql);
    assert_eq!(r.len(), 1, "{r:?}");
    let obj = r[0].as_object().unwrap();
    assert_eq!(obj.len(), 1, "{obj:?}");
    obj.values().next().unwrap().as_i64().unwrap()
}

/// Runs a query that must be refused (exit 1); returns stderr.
fn refused(demo: &Demo, principal: &str, sql: &str) -> String {
    let out = demo.lethe(&["query", "--as", principal, sql]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "expected a refusal for {principal}: {sql}\nstdout:\n{}\nstderr:\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr.contains("refused"), "{stderr}");
    stderr
}

fn check(demo: &Demo, code: i32) -> Value {
    serde_json::from_str(&demo.lethe_ok(&["consent", "check", "--json"], code)).unwrap()
}

fn stale<'a>(report: &'a Value, table: &str) -> &'a Value {
    report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == table)
        .unwrap_or_else(|| panic!("{table} not in {report}"))
}

fn key_text(demo: &Demo) -> String {
    std::fs::read_to_string(demo.dir.join("state/pseudonym.key"))
        .unwrap()
        .trim()
        .to_string()
}

fn pseudonym_of(demo: &Demo, id: &str) -> String {
    let key = PseudonymKey::from_bytes(key_text(demo).into_bytes()).unwrap();
    PseudonymUdf::new(&key).unwrap().pseudonym(id.as_bytes())
}

fn audit(demo: &Demo) -> Vec<lethe::access::audit::AuditEntry> {
    AuditLog::in_state(&demo.dir.join("state"))
        .entries()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn marketing_sees_one_fewer_after_a_withdrawal_and_the_built_table_until_rebuilt() {
    let demo = Demo::new().await;
    let n = number(&demo, "marketing-1", COUNT);
    // The row filter is exactly "consent given and active", computed independently by the dpo.
    let expected = number(
        &demo,
        "dpo",
        "SELECT count(*) FROM crm.learners WHERE marketing_consent AND status = 'active'",
    );
    assert_eq!(n, expected);
    assert!(n > 1000, "{n}");
    assert_eq!(number(&demo, "dpo", COUNT), 5_000);
    let before = check(&demo, 0);
    assert_eq!(stale(&before, "marketing.audience")["stale_rows"], 0);
    assert_eq!(stale(&before, "ai.review_corpus")["stale_rows"], 0);
    assert_eq!(
        stale(&before, "ai.review_corpus")["via"],
        "review_id -> learning.reviews.learner_id"
    );

    let w: Value = serde_json::from_str(&demo.lethe_ok(
        &[
            "consent",
            "withdraw",
            "--subject",
            "learner=3590",
            "--purpose",
            "marketing",
            "--source",
            "unsubscribe link",
            "--json",
        ],
        0,
    ))
    .unwrap();
    assert_eq!(w["withdrawal"]["previous"], "given");
    assert_eq!(w["withdrawal"]["current"], "withdrawn");
    assert_eq!(w["withdrawal"]["sync"]["rows_changed"]["crm.learners"], 1);
    assert!(w["erasure"].is_null(), "a withdrawal alone erases nothing");

    assert_eq!(number(&demo, "marketing-1", COUNT), n - 1);
    assert_eq!(
        number(
            &demo,
            "marketing-1",
            "SELECT count(*) FROM crm.learners WHERE learner_id = 3590"
        ),
        0
    );
    // crm.learners still stores every row, the learner's included.
    assert_eq!(number(&demo, "dpo", COUNT), 5_000);
    let me = rows(
        &demo,
        "dpo",
        "SELECT marketing_consent, email FROM crm.learners WHERE learner_id = 3590",
    );
    assert_eq!(me.len(), 1);
    assert_eq!(me[0]["marketing_consent"], false);
    assert!(me[0]["email"].as_str().unwrap().contains('@'));

    // The built table still holds the learner, and check says so (exit 1).
    let in_audience = "SELECT count(*) FROM marketing.audience WHERE learner_id = 3590";
    assert_eq!(number(&demo, "dpo", in_audience), 1);
    let after = check(&demo, 1);
    let a = stale(&after, "marketing.audience");
    assert_eq!(a["stale_rows"], 1);
    assert_eq!(a["stale_ids"], serde_json::json!(["3590"]));
    assert_eq!(a["via"], "learner_id");
    assert_eq!(stale(&after, "ai.review_corpus")["stale_rows"], 0);
    assert!(after["drift"].as_array().unwrap().is_empty());
    let text = demo.lethe(&["consent", "check"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("3590"));

    // History: given at sign-up, then withdrawn; both kept.
    let shown: Value = serde_json::from_str(&demo.lethe_ok(
        &["consent", "show", "--subject", "learner=3590", "--json"],
        0,
    ))
    .unwrap();
    assert_eq!(shown["current"]["marketing"], "withdrawn");
    let states: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["purpose"] == "marketing")
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["given", "withdrawn"]);
    assert_eq!(
        number(
            &demo,
            "dpo",
            "SELECT count(*) FROM consent.records WHERE learner_id = 3590 AND purpose = 'marketing'"
        ),
        2
    );

    let rebuilt: Value =
        serde_json::from_str(&demo.lethe_ok(&["consent", "rebuild", "--json"], 0)).unwrap();
    let runs: Vec<&str> = rebuilt["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["pipeline"].as_str().unwrap())
        .collect();
    assert_eq!(
        runs,
        ["marketing_audience"],
        "only the stale pipeline reruns"
    );
    assert_eq!(number(&demo, "dpo", in_audience), 0);
    let clean = check(&demo, 0);
    assert_eq!(stale(&clean, "marketing.audience")["stale_rows"], 0);
    assert_eq!(number(&demo, "dpo", COUNT), 5_000);
}

#[tokio::test(flavor = "multi_thread")]
async fn consent_given_again_withdraw_with_rebuild_and_erase_only_when_asked() {
    let demo = Demo::new().await;
    let n = number(&demo, "marketing-1", COUNT);
    // --rebuild: the stale table is rebuilt in the same command.
    demo.lethe_ok(
        &[
            "consent",
            "withdraw",
            "--subject",
            "learner=3590",
            "--purpose",
            "marketing",
            "--rebuild",
        ],
        0,
    );
    check(&demo, 0);
    assert_eq!(number(&demo, "marketing-1", COUNT), n - 1);
    // Given again: back in the next query; a backdated change doesn't override a later one.
    demo.lethe_ok(
        &[
            "consent",
            "set",
            "--subject",
            "learner=3590",
            "--purpose",
            "marketing",
            "--state",
            "given",
        ],
        0,
    );
    assert_eq!(number(&demo, "marketing-1", COUNT), n);
    let old: Value = serde_json::from_str(&demo.lethe_ok(
        &[
            "consent",
            "set",
            "--subject",
            "learner=3590",
            "--purpose",
            "marketing",
            "--state",
            "expired",
            "--at",
            "2025-01-01",
            "--json",
        ],
        0,
    ))
    .unwrap();
    assert_eq!(old["current"], "given");
    assert_eq!(number(&demo, "marketing-1", COUNT), n);
    // An unknown learner (no AI-training answer) gives consent: the built table is not stale
    // (it lacks them; rebuilding would add them, which check doesn't ask for).
    let unknown = rows(
        &demo,
        "dpo",
        "SELECT learner_id FROM crm.learners WHERE ai_training_consent IS NULL ORDER BY learner_id LIMIT 1",
    );
    let id = unknown[0]["learner_id"].as_i64().unwrap();
    let shown: Value = serde_json::from_str(&demo.lethe_ok(
        &[
            "consent",
            "show",
            "--subject",
            &format!("learner={id}"),
            "--json",
        ],
        0,
    ))
    .unwrap();
    assert_eq!(shown["current"]["ai_training"], "unknown");

    // --erase sends the withdrawal through the erasure path, only when asked.
    let out: Value = serde_json::from_str(&demo.lethe_ok(
        &[
            "consent",
            "withdraw",
            "--subject",
            "learner=3590",
            "--purpose",
            "ai_training",
            "--erase",
            "--request",
            "erasure-0007",
            "--min-age",
            "0",
            "--json",
        ],
        0,
    ))
    .unwrap();
    assert_eq!(out["erasure"]["journal"]["batch"], "erasure-0007");
    assert_eq!(
        number(
            &demo,
            "dpo",
            "SELECT count(*) FROM crm.learners WHERE learner_id = 3590"
        ),
        0
    );
    assert_eq!(
        number(
            &demo,
            "dpo",
            "SELECT count(*) FROM consent.records WHERE learner_id = 3590"
        ),
        0
    );
    assert_eq!(number(&demo, "dpo", COUNT), 4_999);
}

#[tokio::test(flavor = "multi_thread")]
async fn analysts_get_pseudonyms_that_join_across_tables_and_nothing_for_a_real_id() {
    let demo = Demo::new().await;
    let join = "SELECT count(*) FROM crm.learners l JOIN learning.enrollments e ON e.learner_id = l.learner_id";
    let joined = number(&demo, "analyst_gb", join);
    assert_eq!(joined, number(&demo, "dpo", join));
    assert!(joined > 10_000, "{joined}");
    // Every enrollment's pseudonym is a learner's pseudonym.
    assert_eq!(
        number(
            &demo,
            "analyst_gb",
            "SELECT count(*) FROM learning.enrollments WHERE learner_id NOT IN (SELECT learner_id FROM crm.learners)"
        ),
        0
    );
    // A real ID finds nothing, as a number or as text.
    for sql in [
        "SELECT count(*) FROM crm.learners WHERE learner_id = 3590",
        "SELECT count(*) FROM crm.learners WHERE learner_id = '3590'",
        "SELECT count(*) FROM learning.events WHERE learner_id IN (3590, 1, 2)",
    ] {
        assert_eq!(number(&demo, "analyst_gb", sql), 0, "{sql}");
    }
    // The pseudonym is HMAC-SHA256 under the key, first 16 hex: the same in every table.
    let p = pseudonym_of(&demo, "3590");
    for (table, real) in [
        ("crm.learners", 1),
        ("learning.enrollments", 2),
        ("learning.events", 19),
        ("billing.payments", 2),
    ] {
        let dpo = number(
            &demo,
            "dpo",
            &format!("SELECT count(*) FROM {table} WHERE learner_id = 3590"),
        );
        assert_eq!(dpo, real, "{table}");
        let analyst = number(
            &demo,
            "analyst_gb",
            &format!("SELECT count(*) FROM {table} WHERE learner_id = '{p}'"),
        );
        assert_eq!(analyst, dpo, "{table}");
    }
    // Masks by classification: identifier pseudonym, personal null, generalised columns.
    let r = rows(
        &demo,
        "analyst_gb",
        &format!("SELECT * FROM crm.learners WHERE learner_id = '{p}'"),
    );
    assert_eq!(r.len(), 1);
    let me = r[0].as_object().unwrap();
    assert_eq!(me["learner_id"], p.as_str());
    let email = me["email"].as_str().unwrap();
    assert_eq!(email.len(), 16);
    assert!(email.chars().all(|c| c.is_ascii_hexdigit()));
    for c in ["full_name", "phone", "street_address", "notes"] {
        assert!(me.get(c).is_none_or(Value::is_null), "{c}: {:?}", me.get(c));
    }
    assert_eq!(me["city"].as_str().unwrap().chars().count(), 3);
    let year = me["date_of_birth"].as_i64().unwrap();
    assert!((1950..2006).contains(&year), "{year}");
    let dpo_me = rows(
        &demo,
        "dpo",
        "SELECT city FROM crm.learners WHERE learner_id = 3590",
    );
    assert!(
        dpo_me[0]["city"]
            .as_str()
            .unwrap()
            .starts_with(me["city"].as_str().unwrap())
    );
    // The pseudonym function can't be called from SQL (it would turn IDs into pseudonyms).
    let out = demo.lethe(&[
        "query",
        "--as",
        "analyst_gb",
        "SELECT lethe_pseudonym(3590)",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&p));
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_unclassified_tables_unknown_principals_and_the_key_are_audited() {
    let demo = Demo::new().await;
    let why = refused(&demo, "analyst_gb", "SELECT * FROM marketing.audience");
    assert!(why.contains("nobody classified"), "{why}");
    assert!(number(&demo, "dpo", "SELECT count(*) FROM marketing.audience") > 1000);
    let why = refused(&demo, "mallory", COUNT);
    assert!(why.contains("unknown principal `mallory`"), "{why}");
    let why = refused(&demo, "analyst_gb", "SELECT * FROM consent.records");
    assert!(why.contains("may not read `consent.records`"), "{why}");
    let why = refused(&demo, "marketing-1", "SELECT * FROM learning.events");
    assert!(why.contains("may not read `learning.events`"), "{why}");
    // The key file, as a table, an external table or a copy target.
    for sql in [
        "SELECT * FROM 'state/pseudonym.key'",
        "SELECT * FROM state.pseudonym_key",
        "CREATE EXTERNAL TABLE k (a VARCHAR) STORED AS CSV LOCATION 'state/pseudonym.key'",
        "COPY (SELECT 1) TO 'state/out.csv'",
        "SET datafusion.catalog.information_schema = true",
        "SELECT 1; SELECT 2",
    ] {
        refused(&demo, "analyst_gb", sql);
    }
    assert!(!demo.dir.join("state/out.csv").exists());
    // A principal in no role.
    let policy = demo.dir.join("governance/policy.toml");
    let text = std::fs::read_to_string(&policy).unwrap();
    std::fs::write(
        &policy,
        text.replace(
            "dpo = { role = \"privacy\" }",
            "dpo = { role = \"privacy\" }\nintern = {}",
        ),
    )
    .unwrap();
    let why = refused(&demo, "intern", COUNT);
    assert!(why.contains("in no role"), "{why}");
    let check = demo.lethe_ok(&["policy", "check"], 0);
    assert!(check.contains("`intern` is in no role"), "{check}");

    // Every decision is in the audit log with a hash of its SQL and never its text.
    let log = audit(&demo);
    let denies = log.iter().filter(|e| e.decision == Decision::Deny).count();
    let allows = log.iter().filter(|e| e.decision == Decision::Allow).count();
    assert_eq!(denies, 11, "{log:#?}");
    assert_eq!(allows, 1, "{log:#?}");
    let by = |sql: &str| {
        log.iter()
            .find(|e| e.sql_sha256 == sql_hash(sql))
            .unwrap_or_else(|| panic!("no entry for {sql}"))
    };
    let e = by("SELECT * FROM marketing.audience");
    assert_eq!(
        (e.principal.as_str(), e.role.as_deref()),
        ("analyst_gb", Some("analysts"))
    );
    assert_eq!(e.tables, ["marketing.audience"]);
    assert!(e.reason.as_deref().unwrap().contains("nobody classified"));
    let e = by("SELECT * FROM 'state/pseudonym.key'");
    assert_eq!(e.decision, Decision::Deny);
    let e = by("SELECT count(*) FROM marketing.audience");
    assert_eq!((e.principal.as_str(), e.decision), ("dpo", Decision::Allow));
    let raw = std::fs::read_to_string(demo.dir.join("state/audit.jsonl")).unwrap();
    for sql in [
        "SELECT * FROM marketing.audience",
        "SELECT count(*) FROM marketing.audience",
        "COPY (SELECT 1)",
    ] {
        assert!(!raw.contains(sql), "the log holds no SQL text");
    }
    assert!(!raw.contains(&key_text(&demo)));

    // Allowed queries list the rules applied.
    number(&demo, "marketing-1", COUNT);
    number(&demo, "analyst_gb", "SELECT count(*) FROM learning.events");
    let log = audit(&demo);
    let m = &log[log.len() - 2];
    assert_eq!(m.decision, Decision::Allow);
    assert!(
        m.rules.contains(&"row_filter crm.learners".to_string()),
        "{:?}",
        m.rules
    );
    assert!(
        m.rules
            .contains(&"mask crm.learners.phone: null".to_string()),
        "{:?}",
        m.rules
    );
    let a = &log[log.len() - 1];
    assert_eq!(a.tables, ["learning.events"]);
    assert!(
        a.rules
            .contains(&"mask learning.events.learner_id: pseudonym".to_string()),
        "{:?}",
        a.rules
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_key_never_appears_in_output_explain_logs_or_errors() {
    let demo = Demo::new().await;
    let key = key_text(&demo);
    let p = pseudonym_of(&demo, "3590");
    let mut seen = String::new();
    let run = |args: &[&str], seen: &mut String| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_lethe"))
            .args(args)
            .current_dir(&demo.dir)
            .env("LETHE_LOG", "debug")
            .env_remove("LETHE_PSEUDONYM_KEY")
            .env_remove("LETHE_PSEUDONYM_KEY_FILE")
            .output()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&out.stdout));
        seen.push_str(&String::from_utf8_lossy(&out.stderr));
        out
    };
    let q = format!("SELECT learner_id, email FROM crm.learners WHERE learner_id = '{p}'");
    let out = run(&["query", "--as", "analyst_gb", &q], &mut seen);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(&p));
    for explain in ["EXPLAIN", "EXPLAIN VERBOSE", "EXPLAIN ANALYZE"] {
        let out = run(
            &["query", "--as", "analyst_gb", &format!("{explain} {q}")],
            &mut seen,
        );
        assert!(out.status.success());
        let shown = String::from_utf8_lossy(&out.stdout);
        let expr = if explain == "EXPLAIN ANALYZE" {
            "lethe_pseudonym(learner_id@0)"
        } else {
            "lethe_pseudonym(crm.learners.learner_id)"
        };
        assert!(shown.contains(expr), "{shown}");
    }
    // Errors: a type error in a query over pseudonyms, a query that fails at run time.
    let out = run(
        &[
            "query",
            "--as",
            "analyst_gb",
            "SELECT sum(learner_id) FROM crm.learners",
        ],
        &mut seen,
    );
    assert_eq!(out.status.code(), Some(2));
    let out = run(
        &[
            "query",
            "--as",
            "analyst_gb",
            "SELECT CAST(learner_id AS BIGINT) FROM crm.learners",
        ],
        &mut seen,
    );
    assert_eq!(out.status.code(), Some(2));
    run(
        &["policy", "show", "--as", "analyst_gb", "--json"],
        &mut seen,
    );
    run(
        &["-vv", "query", "--as", "analyst_gb", "--json", &q],
        &mut seen,
    );
    assert!(seen.contains("DEBUG"), "debug logging was on");
    assert!(!seen.contains(&key), "the key leaked");
    assert!(
        !seen.to_lowercase().contains(&key.to_lowercase()[..24]),
        "part of the key leaked"
    );
    let log = std::fs::read_to_string(demo.dir.join("state/audit.jsonl")).unwrap();
    assert!(!log.contains(&key));

    // Another key gives other pseudonyms; without a key the analyst is refused (audited), and
    // marketing, which pseudonymises nothing, still works.
    let other = demo.lethe(&["query", "--as", "analyst_gb", "--json", &q]);
    assert!(String::from_utf8_lossy(&other.stdout).contains(&p));
    let with_env = std::process::Command::new(env!("CARGO_BIN_EXE_lethe"))
        .args(["query", "--as", "analyst_gb", "--json", &q])
        .current_dir(&demo.dir)
        .env("LETHE_PSEUDONYM_KEY", "another-key-of-at-least-16-bytes")
        .output()
        .unwrap();
    assert!(with_env.status.success());
    let shown = String::from_utf8_lossy(&with_env.stdout);
    assert!(
        !shown.contains(&p) && !shown.contains("another-key"),
        "{shown}"
    );
    std::fs::remove_file(demo.dir.join("state/pseudonym.key")).unwrap();
    let why = refused(&demo, "analyst_gb", COUNT);
    assert!(why.contains("no pseudonym key"), "{why}");
    assert!(number(&demo, "marketing-1", COUNT) > 0);
    let last = audit(&demo);
    let deny = last
        .iter()
        .rev()
        .find(|e| e.principal == "analyst_gb")
        .unwrap();
    assert_eq!(deny.decision, Decision::Deny);
    assert!(deny.reason.as_deref().unwrap().contains("no pseudonym key"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_policy_that_does_not_match_the_catalog_refuses_everyone_with_file_and_line() {
    let demo = Demo::new().await;
    let policy = demo.dir.join("governance/policy.toml");
    let good = std::fs::read_to_string(&policy).unwrap();
    for (from, to, expect) in [
        (
            "[roles.marketing.columns.\"crm.learners\"]\nfull_name",
            "[roles.marketing.columns.\"crm.learners\"]\nshoe_size = \"clear\"\nfull_name",
            "no column `shoe_size`",
        ),
        (
            "\"crm.learners\" = \"marketing_consent = true",
            "\"crm.leaners\" = \"marketing_consent = true",
            "unknown table `crm.leaners`",
        ),
        (
            "marketing_consent = true AND status = 'active'",
            "marketing_consent = true AND state = 'active'",
            "state",
        ),
        (
            "ai_training = \"crm.learners.ai_training_consent\"",
            "ai_training = \"crm.learners.ai_consent\"",
            "no column `ai_consent`",
        ),
        (
            "tables = [\"crm.learners\"]",
            "tables = [\"hr.people\"]",
            "matches no table",
        ),
        (
            "personal = \"null\"",
            "personal = \"scramble\"",
            "a mask is",
        ),
    ] {
        assert!(good.contains(from), "{from}");
        std::fs::write(&policy, good.replacen(from, to, 1)).unwrap();
        let why = refused(&demo, "dpo", COUNT);
        assert!(why.contains("policy.toml:"), "{why}");
        assert!(why.contains(expect), "{expect}: {why}");
        let out = demo.lethe(&["policy", "check"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains(expect));
        let last = audit(&demo).pop().unwrap();
        assert_eq!(last.decision, Decision::Deny);
        assert!(last.reason.unwrap().contains(expect));
    }
    std::fs::remove_file(&policy).unwrap();
    let why = refused(&demo, "dpo", COUNT);
    assert!(why.contains("no access policy"), "{why}");
    std::fs::write(&policy, good).unwrap();
    assert_eq!(number(&demo, "dpo", COUNT), 5_000);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_consent_input_is_a_clear_error_and_changes_nothing() {
    let demo = Demo::new().await;
    for (args, expect) in [
        (
            vec![
                "--subject",
                "learner=3590",
                "--purpose",
                "telepathy",
                "--state",
                "given",
            ],
            "unknown purpose `telepathy`",
        ),
        (
            vec![
                "--subject",
                "learner=99999999",
                "--purpose",
                "marketing",
                "--state",
                "given",
            ],
            "no learner with that ID",
        ),
        (
            vec![
                "--subject",
                "learner=abc",
                "--purpose",
                "marketing",
                "--state",
                "given",
            ],
            "IDs are integers",
        ),
        (
            vec![
                "--subject",
                "learner=3590",
                "--purpose",
                "marketing",
                "--state",
                "maybe",
            ],
            "unknown consent state `maybe`",
        ),
        (
            vec![
                "--subject",
                "learner=3590",
                "--purpose",
                "marketing",
                "--state",
                "unknown",
            ],
            "can't be recorded",
        ),
        (
            vec![
                "--subject",
                "instructor=1",
                "--purpose",
                "marketing",
                "--state",
                "given",
            ],
            "not `instructor`",
        ),
        (
            vec![
                "--subject",
                "3590",
                "--purpose",
                "marketing",
                "--state",
                "given",
            ],
            "NAME=ID",
        ),
        (
            vec![
                "--subject",
                "learner=3590",
                "--purpose",
                "marketing",
                "--state",
                "given",
                "--at",
                "someday",
            ],
            "not a time",
        ),
    ] {
        let mut all = vec!["consent", "set"];
        all.extend(args);
        let out = demo.lethe(&all);
        assert_eq!(out.status.code(), Some(2), "{all:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{expect}: {err}");
    }
    assert_eq!(
        number(
            &demo,
            "dpo",
            "SELECT count(*) FROM consent.records WHERE learner_id = 3590"
        ),
        1,
        "only the seeded record"
    );
    let out = demo.lethe(&[
        "consent",
        "withdraw",
        "--subject",
        "learner=3590",
        "--purpose",
        "marketing",
        "--erase",
    ]);
    assert_eq!(out.status.code(), Some(2), "--erase needs --request");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_from_the_crm_export_drifts_and_sync_repairs_it() {
    let demo = Demo::new().await;
    let n = number(&demo, "marketing-1", COUNT);
    demo.lethe_ok(
        &[
            "consent",
            "withdraw",
            "--subject",
            "learner=3590",
            "--purpose",
            "marketing",
        ],
        0,
    );
    // The nightly reload overwrites crm.learners with the CRM's export, which still says true.
    demo.lethe_ok(&["demo", "reload"], 0);
    assert_eq!(number(&demo, "marketing-1", COUNT), n, "the copy drifted");
    let r = check(&demo, 1);
    let drift = r["drift"].as_array().unwrap();
    assert_eq!(drift.len(), 1, "{r}");
    assert_eq!(drift[0]["attribute"], "crm.learners.marketing_consent");
    assert_eq!(drift[0]["rows"], 1);
    let synced: Value =
        serde_json::from_str(&demo.lethe_ok(&["consent", "sync", "--json"], 0)).unwrap();
    assert_eq!(synced["rows_changed"]["crm.learners"], 1);
    assert_eq!(number(&demo, "marketing-1", COUNT), n - 1);
    // The reload reran the pipelines from the drifted copy: the built table is stale again.
    let r = check(&demo, 1);
    assert!(r["drift"].as_array().unwrap().is_empty());
    assert_eq!(
        stale(&r, "marketing.audience")["stale_ids"],
        serde_json::json!(["3590"])
    );
    demo.lethe_ok(&["consent", "rebuild"], 0);
    // A second sync changes nothing and commits nothing.
    let again: Value =
        serde_json::from_str(&demo.lethe_ok(&["consent", "sync", "--json"], 0)).unwrap();
    assert_eq!(again["rows_changed"]["crm.learners"], 0);
    assert!(again["snapshots"].as_object().unwrap().is_empty());
    let ids: BTreeSet<i64> = rows(&demo, "dpo", "SELECT learner_id FROM marketing.audience")
        .iter()
        .map(|r| r["learner_id"].as_i64().unwrap())
        .collect();
    assert!(!ids.contains(&3590));
}

#[tokio::test(flavor = "multi_thread")]
async fn demo_run_withdraws_before_it_erases_and_still_ends_complete() {
    let tmp = tempfile::tempdir().unwrap();
    let out = crate::common::lethe_in(tmp.path(), &["demo", "run", "--dir", "demo"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let withdraw = stdout.find("== 6. Withdraw").expect("the consent step");
    let erase = stdout.find("== 7. ").expect("the step after consent");
    assert!(withdraw < erase);
    let step = &stdout[withdraw..erase];
    // marketing sees N, then N-1; check names the stale table and the learner; rebuild clears it.
    let counts: Vec<i64> = step
        .lines()
        .filter_map(|l| l.trim().trim_matches('|').trim().parse().ok())
        .collect();
    assert_eq!(counts.len(), 2, "{step}");
    assert_eq!(counts[1], counts[0] - 1, "{step}");
    assert!(
        step.contains("marketing.audience  marketing_audience  marketing"),
        "{step}"
    );
    assert!(step.contains("3590"), "{step}");
    assert!(step.contains("rebuilt marketing.audience"), "{step}");
    assert!(
        stdout.contains("logical erasure: COMPLETE; physical purge: FILES REMOVED"),
        "{stdout}"
    );
    // Issue 15: the walkthrough ends with a manifest whose every system is verified — the
    // application database, the warehouse's tables, the export, the vendor, the rebuilt index
    // and the Git evaluation set.
    let attest = stdout
        .rfind("manifest of erasure-0001")
        .expect("the attestation's manifest");
    let manifest = &stdout[attest..];
    assert!(
        manifest.lines().next().unwrap().ends_with("COMPLETE"),
        "{manifest}"
    );
    for system in [
        "app_db",
        "crm.learners",
        "crm_export",
        "helpdesk",
        "support_search",
        "eval_set",
    ] {
        let line = manifest
            .lines()
            .find(|l| l.starts_with(&format!("{system} ")))
            .unwrap_or_else(|| panic!("{system} missing:\n{manifest}"));
        assert!(line.ends_with("verified"), "{line}");
    }
}
