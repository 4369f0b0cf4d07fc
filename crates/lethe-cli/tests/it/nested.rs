//! Issue 20: nested data. A warehouse PyIceberg wrote (tests/interop/make_nested_warehouse.py:
//! UUID string IDs, `contact struct<email, phone, preferred>`, a list of address structs, a map
//! of attributes, visits whose notes mention another patient's email) goes through init,
//! discover, explain, properties, erase, scan and attest; PyIceberg reads every table after.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{interop_dir, lethe_in, python};

const KEY: &str = "nested-test-register-key-0123456789abcdef";

/// The warehouse under `dir/src` (catalog name `hospital`) and the script's JSON.
fn warehouse(dir: &Path) -> (PathBuf, serde_json::Value) {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let out = Command::new(python())
        .arg(interop_dir().join("make_nested_warehouse.py"))
        .arg(&src)
        .arg("hospital")
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "make_nested_warehouse.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (src, serde_json::from_slice(&out.stdout).unwrap())
}

/// Runs one of the interop scripts against the warehouse; returns its JSON.
fn py(src: &Path, script: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(python())
        .arg(interop_dir().join(script))
        .arg(src.join("catalog.db"))
        .arg(src.join("warehouse"))
        .arg("hospital")
        .args(args)
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "{script} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

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

fn json_of(dir: &Path, args: &[&str], code: i32) -> serde_json::Value {
    serde_json::from_str(&ok(lethe_key(dir, args), code, &format!("{args:?}"))).unwrap()
}

/// Inserts `lines` right under the header line `header` of `file`.
fn insert_under(file: &Path, header: &str, lines: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains(header), "{header} in {text}");
    std::fs::write(
        file,
        text.replacen(header, &format!("{header}\n{lines}"), 1),
    )
    .unwrap();
}

const NOT_IDENTIFYING: &str = r#"[patient.not_identifying]
"registry.patients.addresses.element.city" = "a city is shared by many patients"
"billing.claims.addresses.element.city" = "a city is shared by many patients"
"billing.claims.amount" = "an amount doesn't single a patient out"
"registry.visits.details.notes" = "clinical notes go with the patient's visits; mentions elsewhere are reviewed"
"#;

fn subjects(values: &[&str]) -> String {
    let v: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!(
        "[patient]\nidentifiers = [\"registry.patients.patient_id\", \"registry.referrals.referred.patient_id\"]\nvalues = [{}]\n\n{NOT_IDENTIFYING}",
        v.join(", ")
    )
}

/// Columns of `lethe inspect TABLE --json` per live entry: name -> (has bounds, value count).
fn metrics(home: &Path, table: &str) -> Vec<BTreeMap<String, (bool, Option<u64>)>> {
    let v = json_of(home, &["inspect", table, "--json"], 0);
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["status"] != "DELETED" && e["content"] == "data")
        .map(|e| {
            e["columns"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, c)| {
                    (
                        k.clone(),
                        (
                            !c["lower"].is_null() || !c["upper"].is_null(),
                            c["values"].as_u64(),
                        ),
                    )
                })
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn nested_values_are_discovered_declared_erased_searched_and_accounted_for() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, info) = warehouse(tmp.path());
    let home = tmp.path().join("lethe");
    std::fs::create_dir_all(&home).unwrap();
    ok(
        lethe_in(
            &home,
            &[
                "init",
                "--catalog",
                &format!("sqlite:///{}", src.join("catalog.db").display()),
                "--warehouse",
                &src.join("warehouse").display().to_string(),
            ],
        ),
        0,
        "init",
    );
    let first = info["subjects"][0].as_str().unwrap().to_string();
    let second = info["subjects"][1].as_str().unwrap().to_string();

    // Discovery reaches struct fields, list elements and map values, names types as Iceberg
    // writes them, proposes dotted paths, a subject with nested values, and row keys.
    let report = json_of(&home, &["discover", "--json"], 0);
    let table = |t: &str| -> serde_json::Value {
        report["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["table"] == t)
            .unwrap()
            .clone()
    };
    let column = |t: &str, c: &str| -> serde_json::Value {
        table(t)["columns"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["column"] == c)
            .unwrap_or_else(|| panic!("no {t}.{c}"))
            .clone()
    };
    assert_eq!(
        column("registry.patients", "contact")["type"],
        "struct<email: string, phone: string, preferred: string>"
    );
    assert_eq!(
        column("registry.patients", "addresses")["type"],
        "list<struct<street: string, city: string>>"
    );
    assert_eq!(
        column("registry.patients", "attributes")["type"],
        "map<string, string>"
    );
    for c in ["contact.email", "contact.phone", "addresses.element.street"] {
        assert_eq!(
            column("registry.patients", c)["proposal"]["classification"],
            "personal",
            "{c}"
        );
    }
    assert_eq!(
        column("registry.patients", "contact.email")["by_values"]["kind"],
        "email"
    );
    assert_eq!(
        column("registry.visits", "details.notes")["proposal"]["classification"],
        "personal"
    );
    assert_eq!(
        table("registry.visits")["key"]["columns"],
        serde_json::json!(["visit_id"])
    );
    // A struct field holding the patient's ID is found by its values.
    assert_eq!(
        column("registry.referrals", "referred.patient_id")["proposal"]["identifies"],
        "patient"
    );
    let subject = &report["subjects"][0];
    assert_eq!(subject["root"], "registry.patients.patient_id");
    let values: Vec<&str> = subject["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        values.contains(&"contact.email") && values.contains(&"contact.phone"),
        "{values:?}"
    );
    assert!(
        report["diff"]
            .as_str()
            .unwrap()
            .contains("+\"contact.email\" = \"personal\""),
        "{}",
        report["diff"]
    );
    let text = report.to_string();
    for v in [&first, &second, "clinic-mail.example", "+44 1632"] {
        assert!(!text.contains(v), "a sampled value leaked: {v}");
    }
    ok(
        lethe_key(&home, &["discover", "--write"]),
        0,
        "discover --write",
    );
    // What a reviewer adds: the attributes' values are personal, their keys and the contact
    // preference internal; claims are kept under a legal exception that nulls the street of
    // every address and every attribute value.
    let metadata = home.join("governance/metadata.toml");
    insert_under(
        &metadata,
        "[tables.\"registry.patients\".columns]",
        "\"attributes.value\" = \"personal\"\n\"attributes.key\" = \"internal\"\n\"contact.preferred\" = \"internal\"",
    );
    insert_under(
        &metadata,
        "[tables.\"billing.claims\".columns]",
        "\"attributes.value\" = \"personal\"\n\"attributes.key\" = \"internal\"",
    );
    let retention = home.join("governance/retention.toml");
    let mut r = std::fs::read_to_string(&retention).unwrap();
    r.push_str(
        "\n[tables.\"billing.claims\"]\nkeep_days = 2555\ncounted_from = \"submitted_on\"\n\n[erasure.exceptions.\"billing.claims\"]\nreason = \"claims are kept for the insurer's audit\"\ndecided_by = \"legal team\"\nerase_columns = [\"addresses.element.street\", \"attributes.value\"]\n",
    );
    std::fs::write(&retention, &r).unwrap();
    let subjects_file = home.join("governance/subjects.toml");
    let nested_values = [
        "full_name",
        "contact.email",
        "contact.phone",
        "addresses.element.street",
        "attributes.value",
    ];
    std::fs::write(&subjects_file, subjects(&nested_values)).unwrap();

    // Bad input: a misspelt nested path names its file, line, key and the nearest path, and
    // nothing is read or changed.
    let good_subjects = std::fs::read_to_string(&subjects_file).unwrap();
    let good_metadata = std::fs::read_to_string(&metadata).unwrap();
    for (file, good, from, to, want) in [
        (
            &subjects_file,
            &good_subjects,
            "\"contact.email\"",
            "\"contact.emial\"",
            "subjects.toml:3: patient.values: entry 2: table `registry.patients` has no column `contact.emial` (the nearest is `contact.email`)",
        ),
        (
            &subjects_file,
            &good_subjects,
            "\"registry.visits.details.notes\"",
            "\"registry.visits.detail.notes\"",
            "patient.not_identifying.\"registry.visits.detail.notes\": table `registry.visits` has no column `detail.notes` (the nearest is `details.notes`)",
        ),
        (
            &metadata,
            &good_metadata,
            "\"contact.preferred\" = ",
            "\"contact.prefered\" = ",
            "tables.\"registry.patients\".columns.\"contact.prefered\": table `registry.patients` has no column `contact.prefered` (the nearest is `contact.preferred`)",
        ),
        (
            &retention,
            &r,
            "[\"addresses.element.street\"",
            "[\"addresses.element.stret\"",
            "erasure.exceptions.\"billing.claims\".erase_columns: entry 1: table `billing.claims` has no column `addresses.element.stret` (the nearest is `addresses.element.street`)",
        ),
    ] {
        std::fs::write(file, good.replacen(from, to, 1)).unwrap();
        let out = lethe_key(
            &home,
            &["explain", "--subject", &format!("patient={first}")],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "{err}\nwanted: {want}");
        std::fs::write(file, good).unwrap();
    }

    // Before the erasure, the scan finds the second patient's street (a list element's field)
    // and attribute values (a map's values) in the patients and in the claims.
    let before = json_of(
        &home,
        &["scan", "--subject", &format!("patient={second}"), "--json"],
        1,
    );
    let found = |table: &str, trace: &str| {
        before["hits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["table"] == table && h["trace"] == trace && h["place"] == "DataValue")
    };
    for t in ["registry.patients", "billing.claims"] {
        assert!(
            found(t, "value addresses.element.street"),
            "{t}: {before:#}"
        );
        assert!(found(t, "value attributes.value"), "{t}");
    }
    assert!(found("registry.patients", "value contact.email"));

    ok(
        lethe_key(&home, &["properties", "apply"]),
        0,
        "properties apply",
    );

    // 1. `values` naming only top-level columns: the attestation names the nested personal
    // columns it didn't search for, and the verdict is not COMPLETE.
    std::fs::write(&subjects_file, subjects(&["full_name"])).unwrap();
    // explain says so before anything changes.
    let plan = json_of(
        &home,
        &[
            "explain",
            "--subject",
            &format!("patient={first}"),
            "--json",
        ],
        1,
    );
    assert_eq!(plan["plan_verdict"], "COMPLETE", "{plan:#}");
    assert_eq!(plan["verdict"], "INCOMPLETE", "{plan:#}");
    assert!(
        plan["warnings"].to_string().contains("contact.email, contact.phone, addresses.element.street and attributes.value were not traces; add them to the subject's `values`"),
        "{plan:#}"
    );
    assert_eq!(
        plan["searched"]["tables"]["registry.patients"]["not_traces"],
        serde_json::json!([
            "contact.email",
            "contact.phone",
            "addresses.element.street",
            "attributes.value"
        ]),
        "{plan:#}"
    );
    ok(
        lethe_key(
            &home,
            &[
                "erase",
                "--subject",
                &format!("patient={first}"),
                "--request",
                "erasure-0001",
                "--min-age",
                "0",
            ],
        ),
        0,
        "erase 1",
    );
    let a = json_of(&home, &["attest", "--request", "erasure-0001", "--json"], 1);
    assert_eq!(a["verdict"]["logical"], "COMPLETE", "{a:#}");
    assert_eq!(a["verdict"]["physical"], "INCOMPLETE", "{a:#}");
    let remaining = a["verdict"]["remaining"].to_string();
    assert!(
        remaining.contains("searched for 2 of 7 personal columns of registry.patients (1 declared not identifying): contact.email, contact.phone, addresses.element.street and attributes.value were not traces"),
        "{remaining}"
    );
    let patients = &a["searched"]["tables"]["registry.patients"];
    assert_eq!(patients["identifiers"], serde_json::json!(["patient_id"]));
    assert_eq!(patients["values"], serde_json::json!(["full_name"]));
    assert!(
        a["searched"]["traces"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("value full_name"))
    );
    assert!(
        a["case_file"]["values_held"]
            .as_str()
            .unwrap()
            .starts_with("yes"),
        "the case file's values are kept"
    );
    let case: serde_json::Value = serde_json::from_slice(
        &std::fs::read(home.join("state/cases/erasure-0001.case.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(case["destroyed"], false);

    // 2. `values` with the nested paths: the erasure deletes the patient and their visits,
    // nulls the street of each address and each attribute value of their claims, and the
    // attestation lists the two visits whose notes mention the email, by their key.
    std::fs::write(&subjects_file, subjects(&nested_values)).unwrap();
    let erased = json_of(
        &home,
        &[
            "erase",
            "--subject",
            &format!("patient={second}"),
            "--request",
            "erasure-0002",
            "--min-age",
            "0",
            "--json",
        ],
        0,
    );
    let rows: BTreeMap<String, u64> = erased["journal"]["steps"]
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
    assert_eq!(rows["registry.patients"], 1, "{erased:#}");
    assert_eq!(rows["registry.referrals"], 1, "selected by a struct field");
    assert_eq!(
        rows["registry.visits"],
        info["visits_of"][1].as_u64().unwrap()
    );
    assert_eq!(
        rows["billing.claims"],
        info["claims_of"][1].as_u64().unwrap()
    );
    let scan = json_of(&home, &["scan", "--request", "erasure-0002", "--json"], 1);
    let holding: Vec<(String, String, String)> = scan["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["table"].as_str().unwrap_or("").to_string(),
                h["trace"].as_str().unwrap().to_string(),
                h["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        holding.iter().all(|(t, tr, d)| t == "registry.visits"
            && tr == "value contact.email"
            && d.contains("details.notes")),
        "only the notes that mention the email hold a trace: {holding:#?}"
    );
    assert!(!holding.is_empty());
    let a = json_of(&home, &["attest", "--request", "erasure-0002", "--json"], 1);
    assert_eq!(a["verdict"]["logical"], "COMPLETE", "{a:#}");
    assert_eq!(a["verdict"]["physical"], "PENDING", "{a:#}");
    assert!(
        a["searched"]["tables"]
            .as_object()
            .unwrap()
            .values()
            .all(|t| t["not_traces"].as_array().unwrap().is_empty()),
        "{a:#}"
    );
    let traces = a["searched"]["traces"].to_string();
    for t in [
        "value contact.email",
        "value addresses.element.street",
        "value attributes.value",
        "value billing.claims.addresses.element.street (erased)",
    ] {
        assert!(traces.contains(t), "{t}: {traces}");
    }
    let mentions = &a["mentions"]["registry.visits"];
    assert_eq!(mentions["rows"], 2, "{a:#}");
    let mut keys: Vec<String> = mentions["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_string())
        .collect();
    keys.sort();
    let mut want: Vec<String> = info["mentions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| format!("visit_id={}", k.as_str().unwrap()))
        .collect();
    want.sort();
    assert_eq!(keys, want);
    assert_eq!(mentions["columns"], serde_json::json!(["details.notes"]));
    assert_eq!(a["mentions"].as_object().unwrap().len(), 1, "{a:#}");
    // The evidence holds no value of the person.
    let evidence = a.to_string();
    assert!(!evidence.contains(&second) && !evidence.contains("clinic-mail.example"));

    // PyIceberg reads every table: the patients and visits without the erased rows, the
    // claims with the streets and attribute values nulled and the rest of each row kept.
    let counts = py(&src, "read_tables.py", &[]);
    let total = |t: &str| info["tables"][t].as_u64().unwrap();
    assert_eq!(
        counts["registry.patients"]["rows"].as_u64().unwrap(),
        total("registry.patients") - 2
    );
    assert_eq!(
        counts["registry.visits"]["rows"].as_u64().unwrap(),
        total("registry.visits")
            - info["visits_of"][0].as_u64().unwrap()
            - info["visits_of"][1].as_u64().unwrap()
    );
    assert_eq!(
        counts["billing.claims"]["rows"].as_u64().unwrap(),
        total("billing.claims")
    );
    assert_eq!(
        counts["registry.referrals"]["rows"].as_u64().unwrap(),
        total("registry.referrals") - 2
    );
    let claims = py(
        &src,
        "nested_rows.py",
        &["rows", "billing.claims", &format!("patient_id={second}")],
    );
    let claims = claims.as_array().unwrap();
    assert_eq!(claims.len() as u64, info["claims_of"][1].as_u64().unwrap());
    for c in claims {
        assert!(c["amount"].is_number());
        let addresses = c["addresses"].as_array().unwrap();
        assert_eq!(
            addresses.len() as u64,
            info["addresses_of_second"].as_u64().unwrap()
        );
        for a in addresses {
            assert!(a["street"].is_null() && a["city"].is_string(), "{c}");
        }
        let attrs = c["attributes"].as_array().unwrap();
        assert_eq!(attrs.len(), 2);
        for kv in attrs {
            assert!(kv[0].is_string() && kv[1].is_null(), "{c}");
        }
    }
    let other = py(&src, "nested_rows.py", &["rows", "billing.claims"]);
    assert!(
        other
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["patient_id"] != second.as_str() && c["patient_id"] != first.as_str())
            .all(|c| c["addresses"][0]["street"].is_string()),
        "other patients' claims keep their streets"
    );

    // Metrics: `none` on the nested personal fields by their own field ids (no bounds, no
    // counts); the internal map keys keep counts without bounds (as Java: no bounds inside
    // lists and maps); the internal struct field keeps its bounds.
    for entry in metrics(&home, "billing.claims") {
        for c in [
            "addresses.element.street",
            "addresses.element.city",
            "attributes.value",
        ] {
            assert!(!entry.contains_key(c), "{c}: {entry:?}");
        }
        assert!(
            matches!(entry.get("attributes.key"), Some((false, Some(n))) if *n > 0),
            "{entry:?}"
        );
    }
    for entry in metrics(&home, "registry.patients") {
        assert!(!entry.contains_key("contact.email"), "{entry:?}");
        assert!(matches!(
            entry.get("contact.preferred"),
            Some((true, Some(_)))
        ));
    }

    // Review: a person redacts the two notes (with PyIceberg); once the files from before are
    // expired and swept, the attestation is COMPLETE and the case file's values are destroyed.
    let ids: Vec<&str> = info["mentions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let redacted = py(
        &src,
        "nested_rows.py",
        &[
            "redact",
            "registry.visits",
            "visit_id",
            &ids.join(","),
            "details.notes",
            "[redacted after review]",
        ],
    );
    assert_eq!(redacted["changed"], 2);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let now = chrono::Utc::now().to_rfc3339();
    ok(
        lethe_key(&home, &["expire", "--older-than", &now, "registry.visits"]),
        0,
        "expire",
    );
    ok(
        lethe_key(&home, &["sweep", "--min-age", "0", "registry.visits"]),
        0,
        "sweep",
    );
    let a = json_of(&home, &["attest", "--request", "erasure-0002", "--json"], 0);
    assert_eq!(a["verdict"]["physical"], "FILES REMOVED", "{a:#}");
    assert!(a["mentions"].as_object().unwrap().is_empty());
    assert!(
        a["case_file"]["values_held"]
            .as_str()
            .unwrap()
            .starts_with("no")
    );
}
