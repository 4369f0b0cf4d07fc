//! Requests as a workflow (issue 16): due dates and extensions, restriction (left out of
//! queries and pipelines, nothing deleted), legal holds over tables and stores (HELD steps,
//! the re-certified manifest), the drill over the warehouse and every registered store, the
//! attestation's JSON schema, and bad input that changes nothing.

use serde_json::Value;

use crate::common::Demo;

/// The single number a one-row, one-column query returns.
fn number(demo: &Demo, principal: &str, sql: &str) -> i64 {
    let out = demo.lethe_ok(&["query", "--as", principal, sql, "--json"], 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows[0]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .as_i64()
        .unwrap()
}

/// Runs lethe expecting exit 2 (bad input); returns stderr.
fn bad(demo: &Demo, args: &[&str]) -> String {
    let out = demo.lethe(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "lethe {args:?}: {stderr}");
    stderr
}

/// Every file under `state/requests` and the state folder's listing, to show a refusal changed
/// nothing.
fn state_snapshot(demo: &Demo) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![demo.dir.join("state")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.ends_with("audit.jsonl") {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// A small JSON Schema check (type, enum, const, required, properties, additionalProperties,
/// items, `$ref` to `#/$defs/...`): enough for docs/attestation.schema.json, so that a field
/// added to the attestation without documenting it fails here.
fn validate(root: &Value, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        return validate(root, &root["$defs"][name], v, at);
    }
    let type_ok = |t: &str| match t {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "null" => v.is_null(),
        _ => false,
    };
    if let Some(t) = schema.get("type") {
        let ok = match t {
            Value::String(s) => type_ok(s),
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(type_ok),
            _ => true,
        };
        if !ok {
            return Err(format!("{at}: {v} is not {t}"));
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        return Err(format!("{at}: {v} not in {e:?}"));
    }
    if let Some(c) = schema.get("const")
        && c != v
    {
        return Err(format!("{at}: {v} is not {c}"));
    }
    if let Some(o) = v.as_object() {
        for r in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap();
            if !o.contains_key(r) {
                return Err(format!("{at}: required `{r}` missing"));
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, x) in o {
            match props.and_then(|p| p.get(k)) {
                Some(s) => validate(root, s, x, &format!("{at}.{k}"))?,
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        return Err(format!("{at}: `{k}` is not documented in the schema"));
                    }
                    Some(s @ Value::Object(_)) => validate(root, s, x, &format!("{at}.{k}"))?,
                    _ => {}
                },
            }
        }
    }
    if let (Some(items), Some(a)) = (schema.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            validate(root, items, x, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

fn check_schema(attestation: &Value) {
    let text = std::fs::read_to_string(
        crate::common::interop_dir().join("../../docs/attestation.schema.json"),
    )
    .unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    validate(&schema, &schema, attestation, "$").unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restriction_leaves_the_learner_out_of_queries_and_pipelines_deletes_nothing_and_lifts() {
    let demo = Demo::new().await;
    let events = "SELECT count(*) AS n FROM learning.events";
    let own = "SELECT count(*) AS n FROM learning.events WHERE learner_id = 3590";
    let analysts_before = number(&demo, "analyst_gb", events);
    let marketing_before = number(
        &demo,
        "marketing-1",
        "SELECT count(*) AS n FROM crm.learners",
    );
    let in_marketing = number(
        &demo,
        "dpo",
        "SELECT count(*) AS n FROM crm.learners WHERE learner_id = 3590 AND marketing_consent = true AND status = 'active'",
    );
    let learner_rows = number(&demo, "dpo", own);
    assert!(learner_rows > 0);
    let files_of = |v: &Value| -> std::collections::BTreeSet<String> {
        v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["file"].as_str().unwrap().to_string())
            .collect()
    };
    let before: Value =
        serde_json::from_str(&demo.lethe_ok(&["scan", "--subject", "learner=3590", "--json"], 1))
            .unwrap();
    assert!(before["files_holding"].as_u64().unwrap() > 0);

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
            "--instructed-by",
            "acme-learning",
            "--reference",
            "ACME-R-1",
            "--request",
            "restriction-1",
        ],
        0,
    );
    let scan = |demo: &Demo| -> Value {
        serde_json::from_str(&demo.lethe_ok(&["scan", "--request", "restriction-1", "--json"], 1))
            .unwrap()
    };
    let recorded = scan(&demo);
    assert_eq!(files_of(&recorded), files_of(&before));

    // Analysts and marketing see the learner no more; the privacy role still does.
    assert_eq!(
        number(&demo, "analyst_gb", events),
        analysts_before - learner_rows
    );
    assert_eq!(
        number(
            &demo,
            "marketing-1",
            "SELECT count(*) AS n FROM crm.learners"
        ),
        marketing_before - in_marketing
    );
    assert_eq!(
        number(
            &demo,
            "analyst_gb",
            "SELECT count(*) AS n FROM crm.learners WHERE learner_id IS NULL"
        ),
        0
    );
    assert_eq!(number(&demo, "dpo", own), learner_rows);
    let audit = lethe::access::audit::AuditLog::in_state(&demo.dir.join("state"))
        .entries()
        .unwrap();
    assert!(
        audit
            .last()
            .unwrap()
            .rules
            .iter()
            .all(|r| !r.starts_with("restriction"))
    );
    let analyst_entry = audit
        .iter()
        .rev()
        .find(|e| e.principal == "analyst_gb")
        .unwrap();
    assert!(
        analyst_entry
            .rules
            .iter()
            .any(|r| r == "restriction crm.learners: restriction-1"),
        "{:?}",
        analyst_entry.rules
    );

    // Every pipeline run leaves the learner out.
    demo.lethe_ok(&["pipeline", "run", "--all"], 0);
    for t in ["analytics.learner_activity", "marketing.audience"] {
        assert_eq!(
            number(
                &demo,
                "dpo",
                &format!("SELECT count(*) AS n FROM {t} WHERE learner_id = 3590")
            ),
            0,
            "{t}"
        );
    }
    // Nothing of the learner's was deleted: their rows, and every file the proof scan found
    // holding them (a rebuild adds a manifest whose DELETED entry keeps the old file's bounds).
    assert_eq!(number(&demo, "dpo", own), learner_rows);
    let after = scan(&demo);
    assert!(files_of(&after).is_superset(&files_of(&before)));

    // The restriction's manifest: what was suspended where, nothing deleted.
    let m: Value = serde_json::from_str(
        &demo.lethe_ok(&["attest", "--request", "restriction-1", "--json"], 0),
    )
    .unwrap();
    check_schema(&m);
    assert_eq!(m["verdict"]["logical"], "RESTRICTED");
    let mf = &m["manifest"];
    assert_eq!(mf["kind"], "restriction");
    assert_eq!(mf["controller"], "acme-learning");
    assert_eq!(mf["reference"], "ACME-R-1");
    assert_eq!(mf["status"], "RESTRICTED");
    let r = &mf["restriction"];
    assert_eq!(r["deleted"], 0);
    assert_eq!(r["visible_to_roles"], serde_json::json!(["privacy"]));
    let systems = mf["systems"].as_array().unwrap();
    let ev = systems
        .iter()
        .find(|s| s["system"] == "learning.events")
        .unwrap();
    assert_eq!(
        (ev["action"].as_str(), ev["state"].as_str()),
        (Some("SUSPEND"), Some("suspended"))
    );
    assert_eq!(ev["records"].as_i64(), Some(learner_rows));
    assert!(
        systems
            .iter()
            .any(|s| s["system"] == "analytics.course_performance" && s["action"] == "SUSPEND")
    );
    assert!(systems.iter().all(|s| s["residual"].is_null()));

    // Lifting restores the queries; lifting twice is refused and changes nothing.
    demo.lethe_ok(
        &["request", "lift", "restriction-1", "--day", "2026-10-20"],
        0,
    );
    assert_eq!(number(&demo, "analyst_gb", events), analysts_before);
    let state = state_snapshot(&demo);
    let e = bad(
        &demo,
        &["request", "lift", "restriction-1", "--day", "2026-10-21"],
    );
    assert!(e.contains("already lifted on 2026-10-20"), "{e}");
    assert_eq!(state_snapshot(&demo), state);

    // Due dates: a request received more than a month before the day is overdue (exit 1)
    // until extended with a reason (exit 0); the day is a parameter.
    demo.lethe_ok(
        &[
            "request",
            "open",
            "--kind",
            "erasure",
            "--subject",
            "learner=17",
            "--received",
            "2026-09-01",
            "--request",
            "erasure-0017",
        ],
        0,
    );
    demo.lethe_ok(&["request", "list", "--overdue", "--day", "2026-10-01"], 0);
    let listed: Value = serde_json::from_str(&demo.lethe_ok(
        &[
            "request",
            "list",
            "--overdue",
            "--day",
            "2026-10-15",
            "--json",
        ],
        1,
    ))
    .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["id"], "erasure-0017");
    assert_eq!(listed[0]["days_left"], -14);
    let state = state_snapshot(&demo);
    let e = bad(
        &demo,
        &[
            "request",
            "extend",
            "erasure-0017",
            "--months",
            "3",
            "--reason",
            "x",
            "--day",
            "2026-09-20",
        ],
    );
    assert!(e.contains("'3' for '--months"), "{e}");
    assert!(e.contains("not in 1..=2"), "{e}");
    let e = bad(
        &demo,
        &[
            "request",
            "extend",
            "erasure-0017",
            "--months",
            "1",
            "--reason",
            " ",
            "--day",
            "2026-09-20",
        ],
    );
    assert!(e.contains("needs a reason"), "{e}");
    let e = bad(
        &demo,
        &[
            "request",
            "extend",
            "erasure-9999",
            "--months",
            "1",
            "--reason",
            "x",
            "--day",
            "2026-09-20",
        ],
    );
    assert!(e.contains("unknown request `erasure-9999`"), "{e}");
    let e = bad(&demo, &["erase", "--request", "erasure-9999"]);
    assert!(e.contains("unknown request `erasure-9999`"), "{e}");
    let e = bad(&demo, &["erase", "--request", "restriction-1"]);
    assert!(e.contains("is a restriction: it never deletes"), "{e}");
    assert_eq!(state_snapshot(&demo), state);
    demo.lethe_ok(
        &[
            "request",
            "extend",
            "erasure-0017",
            "--months",
            "1",
            "--reason",
            "the request reaches eleven systems",
            "--day",
            "2026-09-20",
        ],
        0,
    );
    demo.lethe_ok(&["request", "list", "--overdue", "--day", "2026-10-15"], 0);
    // An extension past three months from receipt: refused, nothing changes.
    let state = state_snapshot(&demo);
    let e = bad(
        &demo,
        &[
            "request",
            "extend",
            "erasure-0017",
            "--months",
            "2",
            "--reason",
            "more",
            "--day",
            "2026-09-21",
        ],
    );
    assert!(e.contains("would make 3"), "{e}");
    assert_eq!(state_snapshot(&demo), state);

    // An erasure of a restricted learner ends the restriction; the erasure's record names it,
    // and another learner's restriction stays in force.
    for (kind, who, id, day) in [
        ("restriction", "learner=42", "restriction-42", "2026-10-01"),
        ("restriction", "learner=43", "restriction-43", "2026-10-01"),
        ("erasure", "learner=42", "erasure-0042", "2026-10-02"),
    ] {
        demo.lethe_ok(
            &[
                "request",
                "open",
                "--kind",
                kind,
                "--subject",
                who,
                "--received",
                day,
                "--request",
                id,
            ],
            0,
        );
    }
    demo.lethe_ok(
        &[
            "erase",
            "--request",
            "erasure-0042",
            "--day",
            "2026-10-03",
            "--min-age",
            "0s",
        ],
        0,
    );
    let records = lethe::requests::Requests::in_state(&demo.ws.config.paths.state);
    let ended = records.get("restriction-42").unwrap();
    assert_eq!(ended.state, lethe::requests::State::Lifted);
    assert_eq!(ended.lifted.unwrap().by, "erasure erasure-0042");
    assert_eq!(
        records.get("erasure-0042").unwrap().ended_restrictions,
        vec!["restriction-42".to_string()]
    );
    assert_eq!(
        records.get("restriction-43").unwrap().state,
        lethe::requests::State::Restricted
    );
}

const HOLD: &str = r#"[holds."tribunal-2026-118"]
references = ["ACME-DSR-17"]
tables = ["billing.payments", "support.tickets"]
basis = "Employment tribunal claim 2026/118: the learner's payments and tickets are evidence."
decided_by = "legal team"
until = "2026-10-31"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_hold_keeps_two_tables_until_it_ends_then_the_rerun_erases_them_and_recertifies() {
    let demo = Demo::new().await;
    let holds = demo.dir.join("governance/holds.toml");
    demo.lethe_ok(
        &[
            "request",
            "open",
            "--kind",
            "erasure",
            "--subject",
            "learner=3590",
            "--received",
            "2026-10-01",
            "--instructed-by",
            "acme-learning",
            "--reference",
            "ACME-DSR-17",
            "--request",
            "erasure-0001",
        ],
        0,
    );
    // A hold with no basis is refused at load, naming file, line and key; nothing changes.
    std::fs::write(&holds, HOLD.replace("basis = ", "# basis = ")).unwrap();
    let state = state_snapshot(&demo);
    let e = bad(
        &demo,
        &[
            "erase",
            "--request",
            "erasure-0001",
            "--day",
            "2026-10-02",
            "--min-age",
            "0s",
        ],
    );
    assert!(
        e.contains("holds.toml:1:") && e.contains("has no basis"),
        "{e}"
    );
    assert_eq!(state_snapshot(&demo), state);

    std::fs::write(&holds, HOLD).unwrap();
    let payments = "SELECT count(*) AS n FROM billing.payments WHERE learner_id = 3590";
    let paid = number(&demo, "dpo", payments);
    assert!(paid > 0);
    let out = demo.lethe_ok(
        &[
            "erase",
            "--request",
            "erasure-0001",
            "--day",
            "2026-10-02",
            "--min-age",
            "0s",
        ],
        0,
    );
    // Issue 44 (item 14): the advice names no day to pass (a future --day is refused).
    assert!(
        out.contains("HELD billing.payments")
            && out.contains("rerun `lethe erase --request erasure-0001`")
            && !out.contains("--day"),
        "{out}"
    );
    let j = lethe::erasure::erase::load_journal(&demo.ws, "erasure-0001")
        .unwrap()
        .unwrap();
    for s in &j.steps {
        let held = ["billing.payments", "support.tickets"].contains(&s.table.as_str());
        assert_eq!(s.is_held(), held, "{}", s.table);
        if !held && s.action == lethe::erasure::plan::Action::Delete {
            assert!(s.done, "{}", s.table);
        }
    }
    assert_eq!(number(&demo, "dpo", payments), paid);
    assert_eq!(
        number(
            &demo,
            "dpo",
            "SELECT count(*) AS n FROM learning.events WHERE learner_id = 3590"
        ),
        0
    );
    // Issue 44 (item 14): a day after today is refused before anything changes (judged on
    // 2099-01-01 the hold would have ended, and the held tables been erased).
    let tomorrow = (chrono::Utc::now().date_naive() + chrono::Days::new(1)).to_string();
    let state = state_snapshot(&demo);
    for day in [tomorrow.as_str(), "2099-01-01"] {
        let e = bad(
            &demo,
            &[
                "erase",
                "--request",
                "erasure-0001",
                "--day",
                day,
                "--min-age",
                "0s",
            ],
        );
        assert!(e.contains(&format!("--day {day} is after today")), "{e}");
    }
    assert_eq!(number(&demo, "dpo", payments), paid);
    assert_eq!(state_snapshot(&demo), state);
    // The manifest: HELD for those two with the basis, the refusal in words; not COMPLETE.
    let a: Value =
        serde_json::from_str(&demo.lethe_ok(&["attest", "--request", "erasure-0001", "--json"], 1))
            .unwrap();
    check_schema(&a);
    assert_eq!(a["verdict"]["logical"], "PARTLY_REFUSED");
    assert_eq!(a["verdict"]["physical"], "FILES REMOVED");
    let m = &a["manifest"];
    assert_eq!(m["status"], "PARTLY_REFUSED");
    assert_eq!(m["state"], "partly_refused");
    assert_eq!(
        (m["kind"].as_str(), m["controller"].as_str()),
        (Some("erasure"), Some("acme-learning"))
    );
    assert_eq!(
        (m["received"].as_str(), m["due"].as_str()),
        (Some("2026-10-01"), Some("2026-11-01"))
    );
    for s in m["systems"].as_array().unwrap() {
        let held = ["billing.payments", "support.tickets"].contains(&s["system"].as_str().unwrap());
        assert_eq!(
            s["state"]
                .as_str()
                .unwrap()
                .starts_with("HELD under legal hold `tribunal-2026-118`"),
            held,
            "{s}"
        );
    }
    let held: Vec<&str> = m["held"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            assert!(
                h["basis"]
                    .as_str()
                    .unwrap()
                    .contains("tribunal claim 2026/118")
            );
            assert!(h["released_on"].is_null());
            h["system"].as_str().unwrap()
        })
        .collect();
    assert_eq!(held, vec!["billing.payments", "support.tickets"]);
    let refusal = m["refusal"].as_str().unwrap();
    assert!(
        refusal.contains("refused in part") && refusal.contains("until 2026-10-31"),
        "{refusal}"
    );
    let first = m["certifications"][0]["at"].as_str().unwrap().to_string();
    let html = demo.dir.join("a.html");
    demo.lethe_ok(
        &[
            "attest",
            "--request",
            "erasure-0001",
            "--html",
            html.to_str().unwrap(),
        ],
        1,
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Partial refusal") && page.contains("tribunal-2026-118"));

    // On the hold's last day nothing changes; the day after, the rerun erases the held parts.
    let out = demo.lethe_ok(
        &[
            "erase",
            "--request",
            "erasure-0001",
            "--day",
            "2026-10-31",
            "--min-age",
            "0s",
        ],
        0,
    );
    assert!(out.contains("a legal hold still keeps"), "{out}");
    assert_eq!(number(&demo, "dpo", payments), paid);
    demo.lethe_ok(
        &[
            "erase",
            "--request",
            "erasure-0001",
            "--day",
            "2026-11-01",
            "--min-age",
            "0s",
        ],
        0,
    );
    assert_eq!(
        number(
            &demo,
            "dpo",
            "SELECT count(*) AS n FROM billing.payments WHERE learner_id = 3590 AND card_number IS NOT NULL"
        ),
        0
    );
    let a: Value =
        serde_json::from_str(&demo.lethe_ok(&["attest", "--request", "erasure-0001", "--json"], 0))
            .unwrap();
    check_schema(&a);
    assert_eq!(a["verdict"]["logical"], "COMPLETE");
    let m = &a["manifest"];
    assert_eq!(m["status"], "COMPLETE");
    assert_eq!(m["state"], "certified");
    let certs = m["certifications"].as_array().unwrap();
    assert_eq!(certs.len(), 2, "{certs:?}");
    assert_eq!(
        (certs[0]["at"].as_str(), certs[0]["verdict"].as_str()),
        (Some(first.as_str()), Some("PARTLY_REFUSED"))
    );
    assert_eq!(certs[1]["verdict"], "COMPLETE");
    assert!(
        m["held"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["released_on"] == "2026-11-01")
    );
    assert!(m["refusal"].is_null());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_drill_passes_on_the_demo_removes_what_it_seeded_and_names_a_table_no_lineage_accounts_for()
 {
    let demo = Demo::new().await;
    let count = |t: &str| {
        number(
            &demo,
            "dpo",
            &format!("SELECT count(*) AS n FROM {t} WHERE learner_id >= 990000000"),
        )
    };
    let r: Value = serde_json::from_str(&demo.lethe_ok(
        &["drill", "--min-age", "0s", "--day", "2026-10-01", "--json"],
        0,
    ))
    .unwrap();
    assert_eq!(r["failures"], serde_json::json!([]));
    assert_eq!(
        r["verdict"],
        serde_json::json!(["COMPLETE", "FILES REMOVED"])
    );
    let seeded = r["seeded"].as_object().unwrap();
    for t in [
        "crm.learners",
        "learning.events",
        "billing.payments",
        "support.tickets",
    ] {
        assert!(seeded.contains_key(t), "{t} not seeded: {seeded:?}");
    }
    let reached: Vec<&str> = r["reached"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        reached.contains(&"analytics.learner_activity"),
        "{reached:?}"
    );
    let times = r["times"].as_array().unwrap();
    assert!(times.iter().any(|t| t["system"] == "learning.events" && t["erase_seconds"].as_f64().unwrap() > 0.0));
    // Everything it seeded is gone (the row a legal exception would keep too), and so are its
    // own records.
    for t in [
        "crm.learners",
        "learning.events",
        "billing.payments",
        "analytics.learner_activity",
    ] {
        assert_eq!(count(t), 0, "{t}");
    }
    let request = r["request"].as_str().unwrap();
    assert!(
        !demo
            .dir
            .join(format!("state/requests/{request}.json"))
            .exists()
    );
    let register =
        std::fs::read_to_string(demo.dir.join("state/register.jsonl")).unwrap_or_default();
    assert!(!register.contains(request));

    // A job writes a new table without lineage: the drill fails naming it (exit 1).
    let wh = &demo.ws.warehouse;
    let src = wh
        .load(&lethe_iceberg::catalog::TableName::parse("crm.learners").unwrap())
        .await
        .unwrap();
    let rows = lethe_iceberg::ops::rewrite::select_rows(
        wh,
        &src,
        &lethe_iceberg::predicate::Predicate::True,
    )
    .await
    .unwrap();
    let name = lethe_iceberg::catalog::TableName::parse("ext.learner_copy").unwrap();
    wh.create_table(
        &name,
        src.metadata.current_schema().as_ref().clone(),
        None,
        None,
        Default::default(),
        iceberg::spec::FormatVersion::V2,
    )
    .await
    .unwrap();
    lethe_iceberg::ops::rewrite::append(
        wh,
        &name,
        &rows,
        Default::default(),
        lethe_iceberg::writer::WriteOptions {
            max_rows_per_file: None,
        },
    )
    .await
    .unwrap();
    let out = demo.lethe_ok(&["drill", "--min-age", "0s", "--day", "2026-10-01"], 1);
    assert!(
        out.contains("FAIL ext.learner_copy: no lineage accounts for this table"),
        "{out}"
    );
    assert!(out.contains("FAILED"), "{out}");
    assert_eq!(count("crm.learners"), 0);
}

/// What the demo's stores hold, in counts and names (never values): the application
/// database's rows per table, the export folder's files, the vendor's users, the search
/// index's documents, the evaluation set's HEAD commit.
fn stores_snapshot(demo: &Demo) -> Vec<String> {
    let mut out = Vec::new();
    let c = rusqlite::Connection::open(demo.dir.join("app/app.db")).unwrap();
    for t in ["learners", "tickets", "payments"] {
        let n: i64 = c
            .query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))
            .unwrap();
        out.push(format!("app_db {t}: {n}"));
    }
    let mut files: Vec<String> = std::fs::read_dir(demo.dir.join("exports"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    out.push(format!("crm_export: {files:?}"));
    let users: serde_json::Map<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(demo.dir.join("vendor/users.json")).unwrap())
            .unwrap();
    out.push(format!("helpdesk: {} user(s)", users.len()));
    let s = rusqlite::Connection::open(demo.dir.join("search/support.db")).unwrap();
    let n: i64 = s
        .query_row("SELECT count(*) FROM tickets_fts", [], |r| r.get(0))
        .unwrap();
    out.push(format!("support_search: {n}"));
    let head = std::process::Command::new("git")
        .arg("-C")
        .arg(demo.dir.join(lethe_demo::platform::evalset::EVALSET))
        .args(["rev-parse", "HEAD"])
        .output()
        .unwrap();
    out.push(format!(
        "eval_set: {}",
        String::from_utf8_lossy(&head.stdout).trim()
    ));
    out
}

/// The drill through every registered store: the application database, the export files, the
/// vendor (its test-user call), the search index and the evaluation set's Git history are
/// seeded, erased and probed clean, and left as they were; registering a store without a probe
/// makes the drill fail naming it.
#[tokio::test(flavor = "multi_thread")]
async fn the_drill_seeds_and_erases_every_store_and_fails_naming_a_store_without_a_probe() {
    let demo = Demo::with_stores(lethe_demo::platform::appdb::AppDb::Sqlite).await;
    let vendor = demo.vendor().await;
    let before = stores_snapshot(&demo);
    let r: Value = serde_json::from_str(&demo.lethe_ok(
        &["drill", "--min-age", "0s", "--day", "2026-10-01", "--json"],
        0,
    ))
    .unwrap();
    assert_eq!(r["failures"], serde_json::json!([]), "{r:#}");
    // The search index is rebuilt from support.tickets: probed clean after the delete, it is
    // verified by lethe only after its next rebuild (the attestation stays open until then).
    let notes = r["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0]
            .as_str()
            .unwrap()
            .starts_with("store support_search: probed clean after the delete"),
        "{notes:?}"
    );
    let stores = r["stores"].as_array().unwrap();
    let mut names: Vec<&str> = stores
        .iter()
        .map(|s| s["store"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "app_db",
            "crm_export",
            "eval_set",
            "helpdesk",
            "support_search"
        ]
    );
    for s in stores {
        assert!(s["seeded"].as_u64().unwrap() > 0, "{s}");
        assert!(s["deleted"].as_u64().unwrap() > 0, "{s}");
        assert_eq!(s["residual"], 0, "{s}");
    }
    let app_db = stores.iter().find(|s| s["store"] == "app_db").unwrap();
    assert_eq!(app_db["seeded"], 3, "one row per table: {app_db}");
    // The tombstoned payment the erasure keeps is the drill's own: removed afterwards.
    assert_eq!(app_db["removed_after"], 1, "{app_db}");
    let id = r["synthetic_id"].as_i64().unwrap();
    let email = format!("lethe drill {} email", r["request"].as_str().unwrap());
    let seeds = vendor.received().seeds;
    assert_eq!(seeds.len(), 1, "one test user created: {seeds:?}");
    assert!(!vendor.knows(&email));
    assert!(
        r["times"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["system"] == "app_db" && t["seed_seconds"].as_f64().unwrap() > 0.0)
    );
    assert_eq!(stores_snapshot(&demo), before, "synthetic learner {id}");

    // A store registered without a probe: the drill fails naming it, and still removes what
    // it seeded.
    let path = demo.dir.join("governance/stores.toml");
    let mut toml = std::fs::read_to_string(&path).unwrap();
    toml.push_str(
        "\n[stores.nightly_backups]\nkind = \"backup\"\nowner = \"ops team\"\nprobe = \"none\"\nbasis = \"technical_impossibility\"\nexpires = \"35 days after the erasure\"\ncontrol = \"restore_replays_erasure_log\"\n",
    );
    std::fs::write(&path, toml).unwrap();
    let out = demo.lethe_ok(&["drill", "--min-age", "0s", "--day", "2026-10-01"], 1);
    assert!(
        out.contains("FAIL store nightly_backups (backup): has no probe"),
        "{out}"
    );
    assert!(out.contains("FAILED"), "{out}");
    assert_eq!(stores_snapshot(&demo), before);
}

/// A legal hold over a store and a table: the vendor and support.tickets keep the learner (HELD
/// with the basis, and the search index rebuilt from support.tickets with them; the manifest
/// PARTLY_REFUSED) while everything else is erased, the application database included; the
/// nightly reload from that database keeps the held tickets; a hold naming a store stores.toml
/// doesn't register is refused and changes nothing; after the hold ends the rerun deletes and
/// probes what was held and the request is certified again.
#[tokio::test(flavor = "multi_thread")]
async fn a_hold_on_a_store_and_a_table_keeps_them_through_the_nightly_reload_until_it_ends() {
    let demo = Demo::with_stores(lethe_demo::platform::appdb::AppDb::Sqlite).await;
    let vendor = demo.vendor().await;
    let c = rusqlite::Connection::open(demo.dir.join("app/app.db")).unwrap();
    let email: String = c
        .query_row(
            "SELECT email FROM learners WHERE learner_id = 3590",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(vendor.knows(&email));
    demo.lethe_ok(
        &[
            "request",
            "open",
            "--kind",
            "erasure",
            "--subject",
            "learner=3590",
            "--received",
            "2026-10-01",
            "--request",
            "erasure-0001",
        ],
        0,
    );
    let hold = r#"[holds."vendor-audit"]
requests = ["erasure-0001"]
tables = ["support.tickets"]
stores = ["helpdesk"]
basis = "Regulator's audit of the helpdesk contract: its records are kept until the audit closes."
decided_by = "legal team"
until = "2026-10-31"
"#;
    let holds = demo.dir.join("governance/holds.toml");
    let erase = |day: &str, code: i32| {
        demo.lethe_ok(
            &[
                "erase",
                "--request",
                "erasure-0001",
                "--day",
                day,
                "--min-age",
                "0s",
            ],
            code,
        )
    };
    // A hold over a store that isn't registered: refused, naming it; nothing changes.
    std::fs::write(&holds, hold.replace("\"helpdesk\"", "\"helpdesk_eu\"")).unwrap();
    let state = state_snapshot(&demo);
    let e = bad(
        &demo,
        &[
            "erase",
            "--request",
            "erasure-0001",
            "--day",
            "2026-10-02",
            "--min-age",
            "0s",
        ],
    );
    assert!(
        e.contains("`helpdesk_eu` is not a store of") && e.contains("holds.toml"),
        "{e}"
    );
    assert_eq!(state_snapshot(&demo), state);
    assert!(vendor.knows(&email));

    std::fs::write(&holds, hold).unwrap();
    let out = erase("2026-10-02", 0);
    assert!(out.contains("HELD the store helpdesk"), "{out}");
    assert!(vendor.knows(&email), "the held vendor keeps the learner");
    assert_eq!(vendor.received().deletes.get(&email), None);
    let app: i64 = c
        .query_row(
            "SELECT count(*) FROM learners WHERE learner_id = 3590",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(app, 0, "the application database is erased");
    let tickets = "SELECT count(*) AS n FROM support.tickets WHERE learner_id = 3590";
    let held_tickets = number(&demo, "dpo", tickets);
    assert!(held_tickets > 0);
    // The nightly reload replaces support.tickets from the application database, which no
    // longer has the learner's tickets: the reload filtered by the register keeps the held ones.
    demo.lethe_ok(&["demo", "reload", "--suppress"], 0);
    assert_eq!(number(&demo, "dpo", tickets), held_tickets);
    demo.lethe_ok(&["demo", "rebuild-index"], 0);
    demo.lethe_ok(&["verify", "--request", "erasure-0001"], 0);
    let a: Value =
        serde_json::from_str(&demo.lethe_ok(&["attest", "--request", "erasure-0001", "--json"], 1))
            .unwrap();
    check_schema(&a);
    assert_eq!(a["verdict"]["logical"], "PARTLY_REFUSED", "{a:#}");
    let m = &a["manifest"];
    assert_eq!(m["status"], "PARTLY_REFUSED", "{m:#}");
    let helpdesk = m["systems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["system"] == "helpdesk")
        .unwrap();
    assert!(
        helpdesk["state"].as_str().unwrap().starts_with(
            "HELD under legal hold `vendor-audit` until 2026-10-31: Regulator's audit"
        ),
        "{helpdesk}"
    );
    let held: Vec<&str> = m["held"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["system"].as_str().unwrap())
        .collect();
    assert_eq!(held, ["support.tickets", "helpdesk", "support_search"]);
    let search = m["systems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["system"] == "support_search")
        .unwrap();
    assert!(
        search["state"]
            .as_str()
            .unwrap()
            .contains("rebuilt from support.tickets, which this hold keeps"),
        "{search}"
    );
    assert!(
        m["refusal"]
            .as_str()
            .unwrap()
            .contains("the store helpdesk"),
        "{m:#}"
    );

    // The day after the hold ends, the rerun deletes and probes what was held.
    erase("2026-11-01", 0);
    assert!(!vendor.knows(&email));
    assert_eq!(number(&demo, "dpo", tickets), 0);
    demo.lethe_ok(&["demo", "rebuild-index"], 0);
    demo.lethe_ok(&["verify", "--request", "erasure-0001"], 0);
    let a: Value =
        serde_json::from_str(&demo.lethe_ok(&["attest", "--request", "erasure-0001", "--json"], 0))
            .unwrap();
    check_schema(&a);
    let m = &a["manifest"];
    assert_eq!(m["status"], "COMPLETE", "{m:#}");
    assert!(
        m["held"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["released_on"] == "2026-11-01"),
        "{m:#}"
    );
    let certs = m["certifications"].as_array().unwrap();
    assert_eq!(
        certs
            .iter()
            .map(|c| c["verdict"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["PARTLY_REFUSED", "COMPLETE"]
    );
}
