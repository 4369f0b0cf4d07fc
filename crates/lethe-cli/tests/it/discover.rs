//! Issue 9: bring your own warehouse — `lethe init` and `lethe discover` on a warehouse
//! PyIceberg wrote, derived identifiers through explain/erase/scan, precision and recall of the
//! proposals against hand-labelled columns, drift with table properties, bad input.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{Demo, interop_dir, lethe_in, python};

const SUBJECT: &str = "CGB0000113";
const KEY: &str = "discover-test-register-key-0123456789abcdef";

/// A warehouse written by PyIceberg (tests/interop/make_foreign_warehouse.py) under `dir/src`,
/// catalog name `prod`; returns its folder and the script's JSON.
fn pyiceberg_warehouse(dir: &Path) -> (PathBuf, serde_json::Value) {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let script = interop_dir().join("make_foreign_warehouse.py");
    let out = Command::new(python())
        .arg(script)
        .arg(&src)
        .arg("prod")
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "make_foreign_warehouse.py failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        src,
        serde_json::from_slice(&out.stdout).expect("the script printed JSON"),
    )
}

/// Runs lethe in `dir` with the register key set.
fn lethe_key(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lethe"))
        .args(args)
        .current_dir(dir)
        .env_remove("LETHE_CONFIG")
        .env_remove("LETHE_REGISTER_KEY_FILE")
        .env("LETHE_REGISTER_KEY", KEY)
        .output()
        .expect("run lethe")
}

fn ok(out: Output, code: i32, what: &str) -> String {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what} exited {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run(dir: &Path, args: &[&str], code: i32) -> String {
    ok(lethe_in(dir, args), code, &format!("lethe {args:?}"))
}

fn json(dir: &Path, args: &[&str], code: i32) -> serde_json::Value {
    serde_json::from_str(&run(dir, args, code)).expect("JSON")
}

/// Every file under `root` with its bytes: a warehouse or catalog unchanged.
fn fingerprint(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        if d.is_file() {
            out.insert(d.clone(), std::fs::read(&d).unwrap());
            continue;
        }
        for e in std::fs::read_dir(&d).unwrap() {
            stack.push(e.unwrap().path());
        }
    }
    out
}

/// `lethe init` for the PyIceberg warehouse in `dir/lethe`.
fn init_for(dir: &Path, src: &Path) -> PathBuf {
    let home = dir.join("lethe");
    std::fs::create_dir_all(&home).unwrap();
    let catalog = format!("sqlite:///{}", src.join("catalog.db").display());
    run(
        &home,
        &[
            "init",
            "--catalog",
            &catalog,
            "--warehouse",
            &src.join("warehouse").display().to_string(),
        ],
        0,
    );
    home
}

/// Proposals of a `discover --json` report by (table, column).
fn proposals(report: &serde_json::Value) -> BTreeMap<(String, String), serde_json::Value> {
    let mut out = BTreeMap::new();
    for t in report["tables"].as_array().unwrap() {
        for c in t["columns"].as_array().unwrap() {
            out.insert(
                (
                    t["table"].as_str().unwrap().to_string(),
                    c["column"].as_str().unwrap().to_string(),
                ),
                c["proposal"].clone(),
            );
        }
    }
    out
}

fn read_counts(src: &Path, specs: &[&str]) -> serde_json::Value {
    let script = interop_dir().join("read_tables.py");
    let out = Command::new(python())
        .arg(script)
        .arg(src.join("catalog.db"))
        .arg(src.join("warehouse"))
        .arg("prod")
        .args(specs)
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn init_discover_write_and_a_subject_name_make_explain_erase_and_scan_work() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, info) = pyiceberg_warehouse(tmp.path());
    let before = fingerprint(&src);
    let home = init_for(tmp.path(), &src);
    // init read the catalog and the warehouse only, found the catalog's name, wrote the files.
    assert!(
        fingerprint(&src) == before,
        "init changed the catalog or the warehouse"
    );
    let cfg = std::fs::read_to_string(home.join("lethe.toml")).unwrap();
    assert!(cfg.contains("name = \"prod\""), "{cfg}");
    let retention = std::fs::read_to_string(home.join("governance/retention.toml")).unwrap();
    assert!(
        retention.contains("# [tables.\"web.sessions\"]"),
        "{retention}"
    );
    assert!(
        retention
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')),
        "every rule is commented out:\n{retention}"
    );
    for d in ["pipelines", "lineage", "state"] {
        assert!(home.join(d).is_dir(), "{d}");
    }
    let tables = run(&home, &["tables"], 0);
    assert!(tables.contains("web.sessions"), "{tables}");

    // Discovery: proposals as a diff, nothing written, the warehouse untouched.
    let report = json(&home, &["discover", "--json"], 0);
    assert!(
        fingerprint(&src) == before,
        "discover changed the catalog or the warehouse"
    );
    assert!(!report["written"].as_bool().unwrap());
    let p = proposals(&report);
    let session = &p[&("web.sessions".into(), "session_id".into())];
    assert_eq!(session["identifies"], "customer", "{session}");
    assert_eq!(session["derived"]["from"], "customer_id", "{session}");
    assert_eq!(session["derived"]["pattern"], "a-{id}#*", "{session}");
    assert_eq!(
        p[&("web.sessions".into(), "anonymous_id".into())]["derived"]["pattern"],
        "a-{id}"
    );
    assert_eq!(
        p[&("support.tickets".into(), "visitor".into())]["derived"]["pattern"],
        "a-{id}"
    );
    assert_eq!(
        p[&("shop.customers".into(), "customer_id".into())]["identifies"],
        "customer"
    );
    assert!(report["diff"].as_str().unwrap().contains("+session_id = { classification = \"personal\", identifies = \"customer\", derived = { from = \"customer_id\", pattern = \"a-{id}#*\" } }"), "{}", report["diff"]);
    let subjects = report["subjects"].as_array().unwrap();
    assert_eq!(subjects.len(), 1, "{subjects:?}");
    assert_eq!(subjects[0]["root"], "shop.customers.customer_id");
    let unclassified = report["unclassified"].as_u64().unwrap();
    assert!(
        unclassified > 0
            && unclassified == report["unclassified_columns"].as_array().unwrap().len() as u64
    );
    // No sampled value appears in the report.
    let text = report.to_string();
    for v in [SUBJECT, "example.com", "+44 7700"] {
        assert!(
            !text.contains(v),
            "a sampled value `{v}` leaked into the report"
        );
    }
    let metadata = home.join("governance/metadata.toml");
    let skeleton = std::fs::read_to_string(&metadata).unwrap();

    // --write merges; the person then writes nothing but the subject.
    let out = run(&home, &["discover", "--write"], 0);
    assert!(out.contains("added to governance/metadata.toml"), "{out}");
    let written = std::fs::read_to_string(&metadata).unwrap();
    assert!(
        written.starts_with(&skeleton),
        "the skeleton's comments are kept"
    );
    assert!(written.contains("pattern = \"a-{id}#*\""), "{written}");
    std::fs::write(
        home.join("governance/subjects.toml"),
        "[customer]\nidentifiers = [\"shop.customers.customer_id\"]\nvalues = [\"email\", \"phone\", \"full_name\"]\n",
    )
    .unwrap();

    // explain: every table holding the customer, the derived identifiers resolved; the plan
    // is COMPLETE, but the attestation would not be (personal columns nobody declared), and
    // explain says so.
    let plan = json(
        &home,
        &[
            "explain",
            "--subject",
            &format!("customer={SUBJECT}"),
            "--json",
        ],
        1,
    );
    assert_eq!(plan["plan_verdict"], "COMPLETE", "{plan:#}");
    assert_eq!(plan["verdict"], "INCOMPLETE", "{plan:#}");
    assert!(
        plan["warnings"].as_array().unwrap().iter().all(|w| w
            .as_str()
            .unwrap()
            .contains("were not traces")
            || w.as_str().unwrap().contains("was not a trace")),
        "{plan:#}"
    );
    let steps: BTreeMap<String, serde_json::Value> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["table"].as_str().unwrap().to_string(), s.clone()))
        .collect();
    assert_eq!(
        steps.keys().cloned().collect::<Vec<_>>(),
        vec![
            "shop.customers",
            "shop.orders",
            "support.tickets",
            "web.sessions"
        ],
        "{plan:#}"
    );
    assert!(steps.values().all(|s| s["action"] == "DELETE"), "{plan:#}");
    let sessions = &steps["web.sessions"];
    let values: Vec<&str> = sessions["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    // Both derived identifiers select the sessions (OR): a session whose anonymous id is
    // null is still the customer's by its session id.
    let also = &sessions["also"][0];
    let (first, second) = (
        sessions["column"].as_str().unwrap(),
        also["column"].as_str().unwrap(),
    );
    let also_values: Vec<&str> = also["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let by: BTreeMap<&str, Vec<&str>> = [(first, values.clone()), (second, also_values)].into();
    assert_eq!(
        by["session_id"],
        vec!["a-CGB0000113#1", "a-CGB0000113#2", "a-CGB0000113#3"],
        "{sessions}"
    );
    assert_eq!(by["anonymous_id"], vec!["a-CGB0000113"], "{sessions}");
    assert!(
        sessions["via"]
            .as_str()
            .unwrap()
            .contains("derived from customer_id"),
        "{sessions}"
    );

    // properties, erase and scan, then PyIceberg reads what is left.
    let rows = |t: &str| info["tables"][t].as_u64().unwrap();
    ok(
        lethe_key(&home, &["properties", "apply"]),
        0,
        "properties apply",
    );
    let out = ok(
        lethe_key(
            &home,
            &[
                "erase",
                "--subject",
                &format!("customer={SUBJECT}"),
                "--request",
                "erasure-0001",
                "--min-age",
                "0",
                "--json",
            ],
        ),
        0,
        "erase",
    );
    let erased: serde_json::Value = serde_json::from_str(&out).unwrap();
    let by_table: BTreeMap<String, u64> = erased["journal"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["table"].as_str().unwrap().to_string(),
                s["rows"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(by_table["web.sessions"], 3, "{erased:#}");
    assert_eq!(by_table["shop.orders"], 2);
    assert_eq!(by_table["support.tickets"], 1);
    assert_eq!(by_table["shop.customers"], 1);
    let scan = ok(
        lethe_key(&home, &["scan", "--request", "erasure-0001", "--json"]),
        0,
        "scan",
    );
    let scan: serde_json::Value = serde_json::from_str(&scan).unwrap();
    assert_eq!(scan["files_holding"], 0, "{scan:#}");
    assert!(scan["files_read"].as_u64().unwrap() > 5);
    let left = read_counts(
        &src,
        &[
            "web.sessions",
            "web.sessions?anonymous_id=a-CGB0000113",
            "shop.customers",
            "shop.customers?customer_id=CGB0000113",
            "support.tickets?visitor=a-CGB0000113",
            "ref.products",
        ],
    );
    assert_eq!(
        left["web.sessions"]["rows"].as_u64().unwrap(),
        rows("web.sessions") - 3
    );
    assert_eq!(left["web.sessions?anonymous_id=a-CGB0000113"]["rows"], 0);
    assert_eq!(
        left["shop.customers"]["rows"].as_u64().unwrap(),
        rows("shop.customers") - 1
    );
    assert_eq!(left["shop.customers?customer_id=CGB0000113"]["rows"], 0);
    assert_eq!(left["support.tickets?visitor=a-CGB0000113"]["rows"], 0);
    assert_eq!(
        left["ref.products"]["rows"].as_u64().unwrap(),
        rows("ref.products")
    );
}

/// A hand label: what a column holds.
#[derive(Debug, Clone, Copy, PartialEq)]
enum L {
    /// Identifies the subject named (a root, copy or derived identifier).
    Id(&'static str),
    /// Addresses a person directly (email, phone, name, address, IP, card, IBAN).
    Direct,
    /// Describes a person (quasi-identifiers, free text, financial).
    Personal,
    /// Not about a person.
    No,
}

/// The demo, labelled by hand. Where this differs from the demo's own metadata.toml it is on
/// purpose: instructors are people (their IDs, names and bios identify or describe them);
/// learner IDs are personal data, not "internal".
const DEMO_LABELS: &[(&str, &[(&str, L)])] = &[
    (
        "crm.learners",
        &[
            ("learner_id", L::Id("learner")),
            ("full_name", L::Direct),
            ("email", L::Direct),
            ("phone", L::Direct),
            ("street_address", L::Direct),
            ("city", L::Personal),
            ("date_of_birth", L::Personal),
            ("notes", L::Personal),
            ("status", L::No),
            ("marketing_consent", L::No),
            ("ai_training_consent", L::No),
            ("signed_up_at", L::No),
        ],
    ),
    (
        "crm.instructors",
        &[
            ("instructor_id", L::Id("instructor")),
            ("full_name", L::Direct),
            ("email", L::Direct),
            ("bio", L::Personal),
            ("joined_at", L::No),
        ],
    ),
    (
        "learning.courses",
        &[
            ("course_id", L::No),
            ("instructor_id", L::Id("instructor")),
            ("title", L::No),
            ("category", L::No),
            ("price", L::No),
            ("published_at", L::No),
        ],
    ),
    (
        "learning.enrollments",
        &[
            ("enrollment_id", L::No),
            ("learner_id", L::Id("learner")),
            ("course_id", L::No),
            ("enrolled_at", L::No),
            ("completed_at", L::No),
        ],
    ),
    (
        "learning.events",
        &[
            ("event_id", L::No),
            ("learner_id", L::Id("learner")),
            ("course_id", L::No),
            ("kind", L::No),
            ("ip_address", L::Direct),
            ("user_agent", L::Personal),
            ("occurred_at", L::No),
        ],
    ),
    (
        "learning.reviews",
        &[
            ("review_id", L::No),
            ("learner_id", L::Id("learner")),
            ("course_id", L::No),
            ("rating", L::No),
            ("text", L::Personal),
            ("written_at", L::No),
        ],
    ),
    (
        "support.tickets",
        &[
            ("ticket_id", L::No),
            ("learner_id", L::Id("learner")),
            ("opened_at", L::No),
            ("status", L::No),
            ("subject", L::Personal),
            ("body", L::Personal),
        ],
    ),
    (
        "billing.payments",
        &[
            ("payment_id", L::No),
            ("learner_id", L::Id("learner")),
            ("amount", L::Personal),
            ("currency", L::No),
            ("card_number", L::Direct),
            ("paid_at", L::No),
        ],
    ),
    (
        "analytics.learner_activity",
        &[
            ("learner_id", L::Id("learner")),
            ("events", L::No),
            ("courses", L::No),
            ("first_seen", L::No),
            ("last_seen", L::No),
        ],
    ),
    (
        "analytics.course_performance",
        &[
            ("course_id", L::No),
            ("title", L::No),
            ("learners", L::No),
            ("enrollments", L::No),
            ("avg_rating", L::No),
            ("reviews", L::No),
        ],
    ),
    (
        "marketing.audience",
        &[
            ("learner_id", L::Id("learner")),
            ("full_name", L::Direct),
            ("email", L::Direct),
            ("courses_enrolled", L::No),
            ("last_enrolled_at", L::No),
        ],
    ),
    (
        "ai.review_corpus",
        &[("review_id", L::No), ("text", L::Personal)],
    ),
];

/// The PyIceberg warehouse, labelled by hand (see make_foreign_warehouse.py).
const FOREIGN_LABELS: &[(&str, &[(&str, L)])] = &[
    (
        "shop.customers",
        &[
            ("customer_id", L::Id("customer")),
            ("full_name", L::Direct),
            ("email", L::Direct),
            ("phone", L::Direct),
            ("notify_to", L::Direct),
            ("alt_contact", L::Direct),
            ("date_of_birth", L::Personal),
            ("area", L::Personal),
            ("bank_ref", L::Direct),
            ("about", L::Personal),
            ("loyalty_tier", L::No),
            ("country", L::No),
            ("signed_up_at", L::No),
        ],
    ),
    (
        "web.sessions",
        &[
            ("session_id", L::Id("customer")),
            ("anonymous_id", L::Id("customer")),
            ("started_at", L::No),
            ("client", L::Direct),
            ("user_agent", L::Personal),
            ("pages", L::No),
            ("landing_page", L::No),
            ("site", L::No),
        ],
    ),
    (
        "shop.orders",
        &[
            ("order_id", L::No),
            ("customer_id", L::Id("customer")),
            ("ordered_at", L::No),
            ("amount", L::Personal),
            ("currency", L::No),
            ("card_number", L::Direct),
            ("ship_to", L::Direct),
            ("items", L::No),
        ],
    ),
    (
        "support.tickets",
        &[
            ("ticket_id", L::No),
            ("visitor", L::Id("customer")),
            ("opened_at", L::No),
            ("channel", L::No),
            ("message", L::Personal),
        ],
    ),
    (
        "ref.products",
        &[
            ("product_id", L::No),
            ("title", L::No),
            ("category", L::No),
            ("price", L::No),
        ],
    ),
];

#[derive(Debug, Default)]
struct Score {
    tp: usize,
    fp: usize,
    fn_: usize,
    direct: usize,
    direct_found: usize,
    ids: usize,
    ids_found: usize,
    misses: Vec<String>,
    false_alarms: Vec<String>,
    unlabelled: Vec<String>,
}

impl Score {
    fn precision(&self) -> f64 {
        self.tp as f64 / (self.tp + self.fp).max(1) as f64
    }
    fn recall(&self) -> f64 {
        self.tp as f64 / (self.tp + self.fn_).max(1) as f64
    }
}

fn score(report: &serde_json::Value, labels: &[(&str, &[(&str, L)])]) -> Score {
    let p = proposals(report);
    let mut s = Score::default();
    let labelled: BTreeMap<(String, String), L> = labels
        .iter()
        .flat_map(|(t, cols)| {
            cols.iter()
                .map(move |(c, l)| ((t.to_string(), c.to_string()), *l))
        })
        .collect();
    for (k, l) in &labelled {
        let prop = p
            .get(k)
            .unwrap_or_else(|| panic!("{k:?} is labelled but not in the report"));
        let proposed = !prop.is_null();
        if proposed {
            let class = prop["classification"].as_str().unwrap();
            assert!(
                class == "personal" || class == "sensitive",
                "{k:?}: discovery proposed {class}"
            );
        }
        let name = format!("{}.{}", k.0, k.1);
        match (l, proposed) {
            (L::No, true) => {
                s.fp += 1;
                s.false_alarms.push(name.clone());
            }
            (L::No, false) => {}
            (_, true) => s.tp += 1,
            (_, false) => {
                s.fn_ += 1;
                s.misses.push(name.clone());
            }
        }
        if matches!(l, L::Direct | L::Id(_)) {
            s.direct += 1;
            s.direct_found += proposed as usize;
        }
        if let L::Id(subject) = l {
            s.ids += 1;
            if proposed && prop["identifies"] == *subject {
                s.ids_found += 1;
            } else {
                s.misses
                    .push(format!("{name} (as an identifier of {subject})"));
            }
        }
    }
    for k in p.keys() {
        if !labelled.contains_key(k) {
            s.unlabelled.push(format!("{}.{}", k.0, k.1));
        }
    }
    s
}

fn show(what: &str, s: &Score) -> String {
    format!(
        "{what}: precision {:.1}% ({} of {} proposals), recall {:.1}% ({} of {} personal columns), direct identifiers {}/{}, subject identifiers {}/{}; missed: {:?}; false alarms: {:?}; unlabelled (not scored): {:?}",
        s.precision() * 100.0,
        s.tp,
        s.tp + s.fp,
        s.recall() * 100.0,
        s.tp,
        s.tp + s.fn_,
        s.direct_found,
        s.direct,
        s.ids_found,
        s.ids,
        s.misses,
        s.false_alarms,
        s.unlabelled
    )
}

/// Precision and recall against the hand labels (run with --nocapture to see the figures).
#[tokio::test(flavor = "multi_thread")]
async fn precision_and_recall_on_the_demo_and_on_a_pyiceberg_warehouse() {
    let demo = Demo::new().await;
    let report = json(&demo.dir, &["discover", "--json"], 0);
    let d = score(&report, DEMO_LABELS);
    eprintln!("{}", show("demo", &d));
    let tmp = tempfile::tempdir().unwrap();
    let (src, _) = pyiceberg_warehouse(tmp.path());
    let home = init_for(tmp.path(), &src);
    let report = json(&home, &["discover", "--json"], 0);
    let f = score(&report, FOREIGN_LABELS);
    eprintln!("{}", show("pyiceberg warehouse", &f));
    for (what, s) in [("demo", &d), ("pyiceberg warehouse", &f)] {
        assert_eq!(
            s.direct_found,
            s.direct,
            "{what}: every direct identifier is proposed: {}",
            show(what, s)
        );
        assert_eq!(
            s.ids_found,
            s.ids,
            "{what}: every identifier of a subject is found as one: {}",
            show(what, s)
        );
        assert!(s.precision() >= 0.95, "{}", show(what, s));
        assert!(s.recall() >= 0.95, "{}", show(what, s));
    }
    assert_eq!(f.fn_ + f.fp, 0, "{}", show("pyiceberg warehouse", &f));
}

#[tokio::test(flavor = "multi_thread")]
async fn write_keeps_every_reviewed_decision_and_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, _) = pyiceberg_warehouse(tmp.path());
    let home = init_for(tmp.path(), &src);
    let metadata = home.join("governance/metadata.toml");
    // A person's decisions: an odd one, a comment, an owner, an entry discovery has no view on.
    let reviewed = "# reviewed with the shop team\n[tables.\"shop.customers\"]\nowner = \"shop team\"\n[tables.\"shop.customers\".columns]\nemail = \"internal\"   # the DPO's decision, even if odd\nloyalty_tier = \"internal\"\n\n[tables.\"ref.products\".columns]\ntitle = \"public\"\n";
    std::fs::write(&metadata, reviewed).unwrap();
    let report = json(&home, &["discover", "--write", "--json"], 0);
    assert!(report["written"].as_bool().unwrap());
    assert!(report["differing"].as_u64().unwrap() >= 1);
    let text = std::fs::read_to_string(&metadata).unwrap();
    // Every original line is still there, in order.
    let mut rest = text.as_str();
    for line in reviewed.lines() {
        let at = rest
            .find(line)
            .unwrap_or_else(|| panic!("lost `{line}`:\n{text}"));
        rest = &rest[at + line.len()..];
    }
    assert!(
        text.contains("email = \"internal\"   # the DPO's decision, even if odd\n"),
        "{text}"
    );
    assert!(text.contains("\nphone = \"personal\""), "{text}");
    let email = report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == "shop.customers")
        .unwrap()["columns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["column"] == "email")
        .unwrap()
        .clone();
    assert_eq!(email["status"], "differs", "{email}");
    // Again: nothing new, nothing written, same file.
    let again = json(&home, &["discover", "--write", "--json"], 0);
    assert_eq!(again["proposed"], 0, "{}", again["diff"]);
    assert!(!again["written"].as_bool().unwrap());
    assert_eq!(std::fs::read_to_string(&metadata).unwrap(), text);
    // The merged file is valid governance for the other commands.
    run(&home, &["properties", "generate"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn classifications_mirrored_into_table_properties_and_drift_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, _) = pyiceberg_warehouse(tmp.path());
    let home = init_for(tmp.path(), &src);
    run(&home, &["discover", "--write"], 0);
    // Not mirrored yet: drift, exit 1.
    let drift = json(&home, &["discover", "--check", "--json"], 1);
    let sessions = drift
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["table"] == "web.sessions")
        .unwrap()
        .clone();
    assert!(!sessions["mirrored"].as_bool().unwrap());
    assert!(
        sessions["missing"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "lethe.pii.session_id.derived = customer_id a-{id}#*"),
        "{sessions}"
    );
    run(&home, &["discover", "--mirror"], 0);
    run(&home, &["discover", "--check"], 0);
    // The properties travel with the table: PyIceberg sees them.
    let script = "import sys,json\nfrom pyiceberg.catalog.sql import SqlCatalog\nc=SqlCatalog('prod', uri=f'sqlite:///{sys.argv[1]}/catalog.db', warehouse=f'file://{sys.argv[1]}/warehouse')\nprint(json.dumps(dict(c.load_table('web.sessions').properties)))\n";
    let out = Command::new(python())
        .arg("-c")
        .arg(script)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let props: BTreeMap<String, String> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        props.get("lethe.pii.session_id").map(String::as_str),
        Some("personal")
    );
    assert_eq!(
        props
            .get("lethe.pii.session_id.identifies")
            .map(String::as_str),
        Some("customer")
    );
    // A reviewer changes the file: the table drifts until mirrored again.
    let metadata = home.join("governance/metadata.toml");
    let text = std::fs::read_to_string(&metadata).unwrap();
    std::fs::write(
        &metadata,
        text.replace("client = \"personal\"", "client = \"sensitive\""),
    )
    .unwrap();
    let out = run(&home, &["discover", "--check"], 1);
    assert!(
        out.contains("lethe.pii.client: the table has `personal`, metadata.toml says `sensitive`"),
        "{out}"
    );
    let mirrored = json(&home, &["discover", "--mirror", "--json"], 0);
    assert_eq!(mirrored.as_array().unwrap().len(), 1, "{mirrored}");
    run(&home, &["discover", "--check"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn sampling_is_bounded_in_rows_and_time() {
    let demo = Demo::new().await;
    let report = json(&demo.dir, &["discover", "--sample", "200", "--json"], 0);
    let events = report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == "learning.events")
        .unwrap()
        .clone();
    assert_eq!(events["rows_total"], 100_000);
    assert_eq!(events["rows_sampled"], 200);
    assert!(events["files_read"].as_u64().unwrap() <= events["files_total"].as_u64().unwrap());
    // With no time at all, samples stop early and say so; discovery still reports every table.
    let report = json(&demo.dir, &["discover", "--budget", "0", "--json"], 0);
    let tables = report["tables"].as_array().unwrap();
    assert!(
        tables
            .iter()
            .filter(|t| t["rows_total"].as_u64().unwrap() > 0)
            .all(|t| t["cut_short"] == true && t["rows_sampled"] == 0),
        "{tables:?}"
    );
    assert!(
        report["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("cut the sample short"))
    );
    // Progress goes to stderr.
    let out = lethe_in(&demo.dir, &["discover"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("sampling learning.events"));
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_unreachable_catalog_configured_folder_unreadable_table() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let wh = tmp.path().join("wh");
    std::fs::create_dir_all(&wh).unwrap();
    let whs = wh.display().to_string();
    let init =
        |catalog: &str| lethe_in(&home, &["init", "--catalog", catalog, "--warehouse", &whs]);
    // A catalog file that doesn't exist, one that isn't SQLite, a SQLite file that isn't an
    // Iceberg catalog, a catalog lethe can't reach yet: errors, and nothing written.
    let missing = tmp.path().join("missing.db");
    let out = init(&format!("sqlite:///{}", missing.display()));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("does not exist"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!missing.exists(), "init must not create the catalog");
    let text = tmp.path().join("notes.db");
    std::fs::write(
        &text,
        "this is not a database, it is a text file with enough bytes in it",
    )
    .unwrap();
    let out = init(&text.display().to_string());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not an Iceberg SQL catalog"));
    // A PostgreSQL catalog nobody listens for (issue 14 made PostgreSQL a catalog).
    let out = init("postgresql://lethe@127.0.0.1:1/catalog");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("postgresql://lethe@127.0.0.1:1/catalog") && err.contains("can't connect"),
        "{err}"
    );
    assert!(!home.join("lethe.toml").exists() && !home.join("governance").exists());

    // A folder that already holds a configuration: refused, then --force keeps governance.
    let (src, _) = pyiceberg_warehouse(tmp.path());
    let lethe_home = init_for(tmp.path(), &src);
    let catalog = format!("sqlite:///{}", src.join("catalog.db").display());
    let warehouse = src.join("warehouse").display().to_string();
    let again = lethe_in(
        &lethe_home,
        &["init", "--catalog", &catalog, "--warehouse", &warehouse],
    );
    assert_eq!(again.status.code(), Some(2));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.contains("already holds a lethe configuration") && err.contains("--force"),
        "{err}"
    );
    let subjects = lethe_home.join("governance/subjects.toml");
    std::fs::write(
        &subjects,
        "[customer]\nidentifiers = [\"shop.customers.customer_id\"]\n",
    )
    .unwrap();
    let out = run(
        &lethe_home,
        &[
            "init",
            "--catalog",
            &catalog,
            "--warehouse",
            &warehouse,
            "--force",
        ],
        0,
    );
    assert!(
        out.contains("kept governance/subjects.toml as it was"),
        "{out}"
    );
    assert!(
        std::fs::read_to_string(&subjects)
            .unwrap()
            .starts_with("[customer]")
    );
    // A wrong catalog name is named with the ones there are.
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let out = lethe_in(
        &other,
        &[
            "init",
            "--catalog",
            &catalog,
            "--warehouse",
            &warehouse,
            "--name",
            "nope",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("prod (5 tables)"));

    // A table that can't be read: reported, exit 1, the other tables still get proposals.
    let tickets = src.join("warehouse/support/tickets/data");
    for f in std::fs::read_dir(&tickets).unwrap() {
        std::fs::write(f.unwrap().path(), b"not parquet").unwrap();
    }
    let report = json(&lethe_home, &["discover", "--json"], 1);
    let unreadable = report["unreadable"].as_array().unwrap();
    assert_eq!(unreadable.len(), 1, "{unreadable:?}");
    assert_eq!(unreadable[0]["table"], "support.tickets");
    assert!(
        unreadable[0]["error"].as_str().unwrap().contains("Parquet"),
        "{unreadable:?}"
    );
    let p = proposals(&report);
    assert_eq!(
        p[&("web.sessions".into(), "session_id".into())]["derived"]["pattern"],
        "a-{id}#*"
    );
    let names: BTreeSet<String> = report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !names.contains("support.tickets") && names.len() == 4,
        "{names:?}"
    );
    let text = run(&lethe_home, &["discover"], 1);
    assert!(text.contains("can't read support.tickets"), "{text}");

    // A derived identifier a person got wrong: the plan refuses with the file and line.
    std::fs::write(
        lethe_home.join("governance/metadata.toml"),
        "[tables.\"web.sessions\".columns]\nanonymous_id = \"personal\"\nsession_id = { classification = \"personal\", identifies = \"customer\", derived = { from = \"customer_id\", pattern = \"a-{id}*\" } }\n",
    )
    .unwrap();
    let out = lethe_in(
        &lethe_home,
        &["explain", "--subject", "customer=CGB0000113"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("metadata.toml:3:") && err.contains("literal text is needed"),
        "{err}"
    );
    assert!(!err.contains("CGB0000113"), "{err}");
    std::fs::write(
        lethe_home.join("governance/metadata.toml"),
        "[tables.\"web.sessions\".columns]\nsession_id = { classification = \"personal\", identifies = \"customer\", derived = { from = \"email\", pattern = \"a-{id}#*\" } }\n",
    )
    .unwrap();
    let out = lethe_in(
        &lethe_home,
        &["explain", "--subject", "customer=CGB0000113"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("derived from `email`, which is not an identifier of customer"),
        "{err}"
    );
}
