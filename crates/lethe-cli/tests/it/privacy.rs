//! Issue 44, privacy and secrets: what lethe shows a principal, sends a vendor and leaves on
//! disk never holds a subject's value or a secret it wasn't meant to — plans under a
//! restriction, a vendor's JSON body, the modes of the files it writes and reads.

use std::collections::BTreeSet;

use lethe::access::policy::PseudonymKey;
use lethe::access::query::{Enforcer, PseudonymUdf};
use serde_json::Value;

use crate::common::Demo;

/// Whether `text` holds `value` as a whole token: not inside a longer run of letters and
/// digits (so the ID 3590 is not found in `35901` or `a3590`, but is in `[3590]`).
fn holds(text: &str, value: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    text.match_indices(value).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + value.len()..].chars().next();
        let glued_before = alnum(before) && value.starts_with(char::is_alphanumeric);
        let glued_after = alnum(after) && value.ends_with(char::is_alphanumeric);
        !glued_before && !glued_after
    })
}

#[test]
fn holds_matches_whole_tokens_only() {
    assert!(holds("learner_id NOT IN ([3590])", "3590"));
    assert!(holds("3590", "3590"));
    assert!(!holds("rows=35901 a3590", "3590"));
    assert!(holds("x alexa@post.example,", "alexa@post.example"));
}

/// The learner's identifying values (email, full name, phone) from the demo's CRM export.
fn identifying_values(demo: &Demo, learner: i64) -> Vec<String> {
    let batches =
        lethe::batchio::read_batches(&demo.dir.join("exports/crm_learners.parquet")).unwrap();
    let mut out = Vec::new();
    for b in &batches {
        let ids = arrow::compute::cast(
            b.column_by_name("learner_id").unwrap(),
            &arrow::datatypes::DataType::Int64,
        )
        .unwrap();
        let ids = ids
            .as_any()
            .downcast_ref::<arrow::array::Int64Array>()
            .unwrap();
        for i in 0..b.num_rows() {
            if ids.value(i) != learner {
                continue;
            }
            for c in ["email", "full_name", "phone"] {
                let a = arrow::compute::cast(
                    b.column_by_name(c).unwrap(),
                    &arrow::datatypes::DataType::Utf8,
                )
                .unwrap();
                let a = a
                    .as_any()
                    .downcast_ref::<arrow::array::StringArray>()
                    .unwrap();
                out.push(a.value(i).to_string());
            }
        }
    }
    assert_eq!(out.len(), 3, "learner {learner} is in the export");
    out
}

/// Issue 44 item 10: a restriction is enforced by a filter whose values never show in a plan.
/// Every principal of the demo policy runs EXPLAIN, EXPLAIN VERBOSE and EXPLAIN ANALYZE over
/// every table its role may read (and the issue's own command through the binary); no output
/// holds a value of the restriction's scope, the subject's identifying values, their
/// pseudonyms or the pseudonym key.
#[tokio::test(flavor = "multi_thread")]
async fn explain_under_a_restriction_shows_no_restricted_value_to_any_role() {
    let demo = Demo::new().await;
    demo.lethe_ok(
        &[
            "request",
            "open",
            "--kind",
            "restriction",
            "--subject",
            "learner=3590",
            "--received",
            "2026-10-01",
            "--request",
            "restriction-1",
        ],
        0,
    );
    let state = demo.dir.join("state");
    let scope: Value = serde_json::from_str(
        &std::fs::read_to_string(state.join("cases/restriction-1.scope.json")).unwrap(),
    )
    .unwrap();
    // Each value is tagged: {"type": "int", "value": 3590}.
    let mut values: BTreeSet<String> = BTreeSet::new();
    for t in scope["tables"].as_array().unwrap() {
        for v in t["values"].as_array().unwrap() {
            values.insert(match &v["value"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
        }
    }
    assert!(values.contains("3590"), "{values:?}");
    let key = PseudonymKey::load(&state).unwrap();
    let udf = PseudonymUdf::new(&key).unwrap();
    let mut secrets: Vec<String> = values.iter().cloned().collect();
    secrets.extend(identifying_values(&demo, 3590));
    let pseudonyms: Vec<String> = secrets
        .iter()
        .map(|v| udf.pseudonym(v.as_bytes()))
        .collect();
    secrets.extend(pseudonyms);
    let key_text = std::fs::read_to_string(state.join("pseudonym.key")).unwrap();
    secrets.push(key_text.trim().to_string());
    let check = |what: &str, text: &str| {
        for s in &secrets {
            assert!(!holds(text, s), "{what} shows a restricted value:\n{text}");
        }
    };

    let enforcer = Enforcer::open(&demo.ws).await.unwrap();
    let principals: Vec<String> = enforcer
        .policy()
        .file
        .value
        .principals
        .keys()
        .cloned()
        .collect();
    assert_eq!(principals.len(), 3, "{principals:?}");
    let mut restricted_plans = 0;
    for p in &principals {
        let session = enforcer.session(p).await.unwrap();
        let tables: Vec<String> = session.tables().map(str::to_string).collect();
        assert!(!tables.is_empty(), "{p}");
        for t in &tables {
            for sql in [
                format!("EXPLAIN SELECT * FROM {t}"),
                format!("EXPLAIN VERBOSE SELECT * FROM {t}"),
                format!("EXPLAIN ANALYZE SELECT count(*) FROM {t}"),
            ] {
                let out = session.query(&sql).await.unwrap().to_text().unwrap();
                if out.contains("lethe_unrestricted(") {
                    restricted_plans += 1;
                }
                check(&format!("{p}: {sql}"), &out);
            }
        }
    }
    assert!(restricted_plans > 0, "no plan applied the restriction");

    // The command, through the binary.
    for sql in [
        "EXPLAIN SELECT count(*) FROM crm.learners",
        "EXPLAIN ANALYZE SELECT count(*) FROM crm.learners",
    ] {
        let out = demo.lethe_ok(&["query", "--as", "analyst_gb", sql], 0);
        assert!(out.contains("lethe_unrestricted("), "{out}");
        check(&format!("lethe query --as analyst_gb {sql:?}"), &out);
    }
}

/// Issue 44 item 12: a subject value that looks like a placeholder is sent as written. A
/// learner whose email is `${LETHE_REGISTER_KEY}@example.org` (valid by RFC 5322) is erased
/// while the register key is in that variable; the helpdesk vendor takes deletions as `POST
/// /v1/erasures` with a JSON body. It receives the email as written, as one JSON string, and
/// never the key.
#[tokio::test(flavor = "multi_thread")]
async fn a_placeholder_in_a_subject_value_reaches_the_vendor_as_written_never_the_secret() {
    use lethe_iceberg::ops::rewrite::{append, select_rows};
    use lethe_iceberg::predicate::{Predicate, Value as V};
    let demo = Demo::with_stores(lethe_demo::platform::appdb::AppDb::Sqlite).await;
    let email = "${LETHE_REGISTER_KEY}@example.org";
    let learner = 900_001i64;
    // The learner: a copy of learner 3590's row with another ID and that email.
    let wh = &demo.ws.warehouse;
    let name = lethe_iceberg::catalog::TableName::parse("crm.learners").unwrap();
    let table = wh.load(&name).await.unwrap();
    let rows = select_rows(wh, &table, &Predicate::eq("learner_id", V::Int(3590)))
        .await
        .unwrap();
    let row = rows.iter().find(|b| b.num_rows() > 0).unwrap().slice(0, 1);
    let schema = row.schema();
    let columns: Vec<arrow::array::ArrayRef> = schema
        .fields()
        .iter()
        .zip(row.columns())
        .map(|(f, c)| match f.name().as_str() {
            "learner_id" => arrow::compute::cast(
                &(std::sync::Arc::new(arrow::array::Int64Array::from(vec![learner]))
                    as arrow::array::ArrayRef),
                f.data_type(),
            )
            .unwrap(),
            "email" => std::sync::Arc::new(arrow::array::StringArray::from(vec![email])),
            _ => c.clone(),
        })
        .collect();
    let copy = arrow::array::RecordBatch::try_new(schema, columns).unwrap();
    append(wh, &name, &[copy], Default::default(), Default::default())
        .await
        .unwrap();
    // The vendor knows them; deletions go as a POST with a JSON body.
    let users_file = demo.dir.join(lethe_demo::platform::vendor::USERS);
    let mut users: serde_json::Map<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(&users_file).unwrap()).unwrap();
    users.insert(email.to_string(), Value::from(1));
    std::fs::write(&users_file, serde_json::to_string(&users).unwrap()).unwrap();
    let vendor = demo.vendor().await;
    let stores = demo.dir.join("governance/stores.toml");
    let text = std::fs::read_to_string(&stores).unwrap();
    let delete = text
        .lines()
        .find(|l| l.starts_with("delete_request = { method = \"DELETE\", url = \"http"))
        .unwrap();
    let base = delete
        .split("url = \"")
        .nth(1)
        .unwrap()
        .split("/v1/users")
        .next()
        .unwrap();
    std::fs::write(
        &stores,
        text.replace(
            delete,
            &format!(
                "delete_request = {{ method = \"POST\", url = \"{base}/v1/erasures\", body = '{{\"email\": \"{{subject}}\", \"reason\": \"GDPR Art. 17\"}}' }}"
            ),
        ),
    )
    .unwrap();
    let key = "register-key-must-stay-home-0123456789";
    let args = [
        "erase",
        "--subject",
        &format!("learner={learner}"),
        "--request",
        "erasure-inject",
        "--min-age",
        "0",
    ];
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lethe"))
        .args(args)
        .current_dir(&demo.dir)
        .env_remove("LETHE_REGISTER_KEY_FILE")
        .env("LETHE_REGISTER_KEY", key)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{stdout}\n{stderr}"
    );
    let bodies = vendor.received().erasure_bodies;
    assert_eq!(bodies.len(), 1, "{bodies:?}\n{stdout}\n{stderr}");
    assert!(
        !bodies[0].contains(key),
        "the register key was sent to the vendor"
    );
    let body: Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(body["email"], email, "{body}");
    assert_eq!(body["reason"], "GDPR Art. 17");
    assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
    assert!(!vendor.knows(email), "the vendor still knows the learner");
}

/// A body that is not JSON (`{subject}` outside a string) is refused when the registry loads,
/// naming file, line and key; nothing is sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_body_that_is_not_json_is_refused_with_file_line_and_key() {
    let demo = Demo::with_stores(lethe_demo::platform::appdb::AppDb::Sqlite).await;
    let stores = demo.dir.join("governance/stores.toml");
    let text = std::fs::read_to_string(&stores).unwrap();
    let delete = text
        .lines()
        .find(|l| l.starts_with("delete_request = { method = \"DELETE\""))
        .unwrap();
    std::fs::write(
        &stores,
        text.replace(
            delete,
            "delete_request = { method = \"POST\", url = \"http://127.0.0.1:1/v1/erasures\", body = '{\"id\": {subject}}' }",
        ),
    )
    .unwrap();
    let out = demo.lethe(&["stores", "list"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("stores.toml:")
            && stderr.contains("stores.helpdesk.delete_request.body")
            && stderr.contains("not JSON"),
        "{stderr}"
    );
}

/// Every file under `dir` with its bytes (the audit log left out: refusals are audited).
fn files_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.ends_with("audit.jsonl") {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The permission bits of `p`.
#[cfg(unix)]
fn mode_of(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[cfg(unix)]
fn set_mode(p: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Issue 44 item 13: the files lethe keeps private are so whatever was there before — a
/// restriction's scope written over a leftover temporary file readable by all, the audit log
/// after someone loosened it, a loader's held rows over an existing file —, and a register or
/// pseudonym key file open to its group or others is refused, naming the file, its mode and
/// the fix, before anything changes.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn private_files_stay_private_and_loose_key_files_are_refused() {
    let demo = Demo::new().await;
    let state = demo.dir.join("state");
    // A leftover of the old temporary name, readable by all.
    std::fs::create_dir_all(state.join("cases")).unwrap();
    let leftover = state.join("cases/restriction-1.scope.tmp");
    std::fs::write(&leftover, "{}").unwrap();
    set_mode(&leftover, 0o644);
    demo.lethe_ok(
        &[
            "request",
            "open",
            "--kind",
            "restriction",
            "--subject",
            "learner=3590",
            "--received",
            "2026-10-01",
            "--request",
            "restriction-1",
        ],
        0,
    );
    assert_eq!(
        mode_of(&state.join("cases/restriction-1.scope.json")),
        0o600
    );
    // The audit log, loosened, is private again after the next entry.
    let audit = state.join("audit.jsonl");
    demo.lethe_ok(
        &[
            "query",
            "--as",
            "dpo",
            "SELECT 1 AS one FROM crm.learners LIMIT 1",
        ],
        0,
    );
    set_mode(&audit, 0o644);
    demo.lethe_ok(
        &[
            "query",
            "--as",
            "dpo",
            "SELECT 1 AS one FROM crm.learners LIMIT 1",
        ],
        0,
    );
    assert_eq!(mode_of(&audit), 0o600);
    // A loader's held rows, over a file readable by all.
    let held = demo.dir.join("held.parquet");
    std::fs::write(&held, "old").unwrap();
    set_mode(&held, 0o644);
    let input = demo.dir.join("exports/crm_learners.parquet");
    let out = demo.dir.join("filtered.parquet");
    let args = [
        "register",
        "suppress",
        "--input",
        input.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--mode",
        "drop",
        "--held",
        held.to_str().unwrap(),
        "--json",
    ];
    let v: Value = serde_json::from_str(&demo.lethe_ok(&args, 0)).unwrap();
    assert_eq!(v["held"], 1, "{v}");
    assert_eq!(mode_of(&held), 0o600);
    assert_eq!(
        lethe::batchio::read_batches(&held).unwrap()[0].num_rows(),
        1
    );

    // Key files open to group or others are refused, and nothing changes.
    let register_key = state.join("register.key");
    for mode in [0o640, 0o644, 0o604] {
        set_mode(&register_key, mode);
        let before = files_under(&state);
        let out = demo.lethe(&[
            "erase",
            "--subject",
            "learner=17",
            "--request",
            "erasure-0017",
            "--min-age",
            "0",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&register_key.display().to_string())
                && stderr.contains(&format!("{mode:04o}"))
                && stderr.contains("chmod 600"),
            "{stderr}"
        );
        assert_eq!(
            files_under(&state),
            before,
            "a refused erasure changed the state"
        );
    }
    set_mode(&register_key, 0o600);
    let pseudonym_key = state.join("pseudonym.key");
    set_mode(&pseudonym_key, 0o644);
    let out = demo.lethe(&[
        "query",
        "--as",
        "analyst_gb",
        "SELECT count(*) FROM crm.learners",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&pseudonym_key.display().to_string()) && stderr.contains("chmod 600"),
        "{stderr}"
    );
    set_mode(&pseudonym_key, 0o600);
    demo.lethe_ok(
        &[
            "query",
            "--as",
            "analyst_gb",
            "SELECT count(*) AS n FROM crm.learners",
        ],
        0,
    );
}
