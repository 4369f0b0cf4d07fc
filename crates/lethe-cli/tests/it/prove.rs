//! Issue 6: PROVE and ATTEST — the scan finds the subject where they are and nowhere after the
//! erasure, residuals make the attestation INCOMPLETE, the register catches a reload, the
//! evidence holds no value of the person.

use std::io::Write;

use lethe::erasure::case::{CaseFile, RequestSpec, ValueTrace, read_case};
use lethe::erasure::erase::{erase, prepare};
use lethe_iceberg::ops::rewrite::append;
use lethe_iceberg::writer::WriteOptions;

use crate::common::{Demo, erase_opts};

fn request(id: i64, request: &str) -> RequestSpec {
    RequestSpec {
        request: request.into(),
        subject: "learner".into(),
        id: id.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_scan_finds_the_learner_in_data_and_bounds_then_nowhere() {
    let demo = Demo::new().await;
    let ws = &demo.ws;
    let prepared = prepare(
        ws,
        &ws.governance().unwrap(),
        &[request(3590, "probe")],
        None,
        &|_| {},
    )
    .await
    .unwrap();
    let case = &prepared.cases[0];
    assert!(case.values.iter().any(|v| v.kind == "email"));
    let before = lethe::erasure::prove::prove(ws, &prepared.cases, &|_| {})
        .await
        .unwrap();
    let has = |table: &str, place: &str, trace: &str| {
        before
            .hits
            .iter()
            .any(|h| h.table.as_deref() == Some(table) && h.place == place && h.trace == trace)
    };
    assert!(has("crm.learners", "DataValue", "id learner_id"));
    assert!(has("crm.learners", "DataValue", "value email"));
    assert!(
        has("crm.learners", "ManifestBound", "value email"),
        "the capitalised email is a manifest's lower bound"
    );
    assert!(has("learning.events", "DataValue", "id learner_id"));
    assert!(
        has("learning.reviews", "DataValue", "id review_id"),
        "the IDs of rows the learner owns are traces too"
    );
    assert!(before.files_holding >= 10);

    demo.lethe_ok(&["properties", "apply"], 0);
    erase(ws, &[request(3590, "erasure-0001")], &erase_opts(), &|_| {})
        .await
        .unwrap();
    let out = demo.lethe_ok(&["scan", "--request", "erasure-0001", "--json"], 0);
    let scan: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(scan["files_holding"], 0);
    assert!(scan["unreadable"].as_array().unwrap().is_empty());

    let html = demo.dir.join("attestation.html");
    let att = demo.lethe_ok(
        &[
            "attest",
            "--request",
            "erasure-0001",
            "--json",
            "--html",
            html.to_str().unwrap(),
        ],
        0,
    );
    let a: serde_json::Value = serde_json::from_str(&att).unwrap();
    assert_eq!(a["verdict"]["logical"], "COMPLETE");
    // A local folder: lethe claims only what it did.
    assert_eq!(a["verdict"]["physical"], "FILES REMOVED");
    assert!(
        a["verdict"]["storage"]
            .as_str()
            .unwrap()
            .contains("files removed; media not sanitised"),
        "{}",
        a["verdict"]
    );
    assert_eq!(a["coverage"]["unresolved"], 0);
    assert_eq!(a["tables"].as_array().unwrap().len(), 11); // with consent.records
    assert!(a["subject"]["register_hash"].as_str().unwrap().len() == 64);
    // The evidence holds no value of the person.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("ai.review_corpus"));
    for v in &case.values {
        let needle = v.value.to_lowercase();
        assert!(
            !att.to_lowercase().contains(&needle),
            "the attestation names a {}",
            v.kind
        );
        assert!(
            !page.to_lowercase().contains(&needle),
            "the HTML names a {}",
            v.kind
        );
    }
    assert!(
        !att.contains("\"3590\""),
        "the attestation holds the subject's ID"
    );
    // The case file's values are destroyed once COMPLETE; hashes and counts stay.
    let kept = read_case(ws, "erasure-0001").unwrap();
    assert!(kept.destroyed && kept.values.is_empty() && kept.ids.is_empty());
    assert_eq!(
        kept.rows.get("learning.events").copied().unwrap_or(0),
        case.rows.get("learning.events").copied().unwrap_or(0)
    );
    // Commits' summaries and the metadata hold no value either.
    for t in ws.warehouse.tables().await.unwrap() {
        let meta = std::fs::read_to_string(
            ws.warehouse
                .store
                .local_path(&ws.warehouse.load(&t).await.unwrap().metadata_location)
                .unwrap(),
        )
        .unwrap();
        for v in &case.values {
            assert!(
                !meta.to_lowercase().contains(&v.value.to_lowercase()),
                "{t}'s metadata names a {}",
                v.kind
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_clean_demo_yields_no_false_positive() {
    let demo = Demo::new().await;
    let nobody = CaseFile {
        request: "nobody".into(),
        subject: "learner".into(),
        ids: [
            ("learner_id".to_string(), vec!["987654".to_string()]),
            ("review_id".to_string(), vec!["987654".to_string()]),
        ]
        .into(),
        values: vec![
            ValueTrace {
                kind: "email".into(),
                value: "nobody.at.all@nowhere.example".into(),
            },
            ValueTrace {
                kind: "phone".into(),
                value: "+44 20 7999 9999".into(),
            },
            ValueTrace {
                kind: "full_name".into(),
                value: "Ingrid Q. Zzyzx".into(),
            },
        ],
        ..Default::default()
    };
    let r = lethe::erasure::prove::prove(&demo.ws, &[nobody], &|_| {})
        .await
        .unwrap();
    assert!(r.is_clean(), "{:#?}", r.hits);
    assert!(r.files_read > 60);
}

#[tokio::test(flavor = "multi_thread")]
async fn planted_residuals_make_the_attestation_incomplete_and_are_named() {
    let demo = Demo::new().await;
    let ws = &demo.ws;
    erase(ws, &[request(3590, "erasure-0001")], &erase_opts(), &|_| {})
        .await
        .unwrap();
    let case = read_case(ws, "erasure-0001").unwrap();
    let email = case
        .values
        .iter()
        .find(|v| v.kind == "email")
        .unwrap()
        .value
        .clone();
    // An untouched copy in a raw folder (gzip'ed JSON lines), and a file that can't be read.
    let raw = demo.dir.join("raw/crm_dump");
    std::fs::create_dir_all(&raw).unwrap();
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(raw.join("learners.jsonl.gz")).unwrap(),
        flate2::Compression::default(),
    );
    writeln!(
        gz,
        "{{\"learner_id\": 12, \"email\": \"someone@else.example\"}}"
    )
    .unwrap();
    writeln!(gz, "{{\"learner_id\": 3590, \"email\": {email:?}}}").unwrap();
    gz.finish().unwrap();
    let some_parquet = std::fs::read_dir(demo.dir.join("warehouse/crm.db/instructors/data"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let bytes = std::fs::read(&some_parquet).unwrap();
    std::fs::write(raw.join("truncated.parquet"), &bytes[..bytes.len() / 2]).unwrap();
    let out = demo.lethe(&["attest", "--request", "erasure-0001", "--json"]);
    assert_eq!(out.status.code(), Some(1), "exit 0 only when COMPLETE");
    let a: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(a["verdict"]["logical"], "COMPLETE");
    assert_eq!(a["verdict"]["physical"], "PENDING");
    let remaining = a["verdict"]["remaining"].to_string();
    assert!(
        remaining.contains("learners.jsonl.gz") && remaining.contains("holds the subject"),
        "{remaining}"
    );
    assert!(
        remaining.contains("truncated.parquet") && remaining.contains("can't be read"),
        "{remaining}"
    );
    assert!(
        !out.stdout
            .windows(email.len())
            .any(|w| w == email.as_bytes()),
        "the evidence names the email"
    );
    // Not COMPLETE: the case file keeps its values for the next attempt.
    assert!(!read_case(ws, "erasure-0001").unwrap().destroyed);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_register_catches_a_reload_and_suppression_prevents_it() {
    let demo = Demo::new().await;
    let ws = &demo.ws;
    erase(ws, &[request(3590, "erasure-0001")], &erase_opts(), &|_| {})
        .await
        .unwrap();
    demo.lethe_ok(&["register", "check"], 0);
    // The nightly reload from the CRM export brings the learner back.
    demo.lethe_ok(&["demo", "reload"], 0);
    let out = demo.lethe(&["register", "check", "--json"]);
    assert_eq!(out.status.code(), Some(1), "an incident");
    let incidents: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tables: Vec<&str> = incidents
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["table"].as_str().unwrap())
        .collect();
    assert!(
        tables.contains(&"crm.learners") && tables.contains(&"analytics.learner_activity"),
        "{tables:?}"
    );
    assert!(
        !tables.contains(&"billing.payments"),
        "rows an exception keeps are not incidents"
    );
    assert!(
        incidents
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["requests"] == serde_json::json!(["erasure-0001"]))
    );
    // With suppression in the reload: nothing comes back.
    let reload: serde_json::Value =
        serde_json::from_str(&demo.lethe_ok(&["demo", "reload", "--suppress", "--json"], 0))
            .unwrap();
    assert_eq!(reload["suppressed"], 1);
    demo.lethe_ok(&["register", "check"], 0);
    // `register suppress` on a file: drop and tombstone.
    let export = demo.dir.join(lethe_demo::platform::EXPORT);
    let dropped = demo.dir.join("dropped.parquet");
    demo.lethe_ok(
        &[
            "register",
            "suppress",
            "--input",
            export.to_str().unwrap(),
            "--output",
            dropped.to_str().unwrap(),
            "--mode",
            "drop",
        ],
        0,
    );
    let rows: usize = lethe::batchio::read_batches(&dropped)
        .unwrap()
        .iter()
        .map(|b| b.num_rows())
        .sum();
    assert_eq!(rows, 4999);
    let tomb = demo.dir.join("tomb.csv");
    let out = demo.lethe_ok(
        &[
            "register",
            "suppress",
            "--input",
            export.to_str().unwrap(),
            "--output",
            tomb.to_str().unwrap(),
            "--mode",
            "tombstone",
            "--null",
            "email",
            "--json",
        ],
        0,
    );
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (s["rows_out"].as_u64(), s["suppressed"].as_u64()),
        (Some(5000), Some(1))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn another_learners_ticket_naming_the_subject_is_a_mention() {
    let demo = Demo::new().await;
    let ws = &demo.ws;
    let prepared = prepare(
        ws,
        &ws.governance().unwrap(),
        &[request(3590, "probe")],
        None,
        &|_| {},
    )
    .await
    .unwrap();
    let email = prepared.cases[0]
        .values
        .iter()
        .find(|v| v.kind == "email")
        .unwrap()
        .value
        .clone();
    let ticket = arrow::array::RecordBatch::try_from_iter(vec![
        (
            "ticket_id",
            std::sync::Arc::new(arrow::array::Int64Array::from(vec![77_777]))
                as arrow::array::ArrayRef,
        ),
        (
            "learner_id",
            std::sync::Arc::new(arrow::array::Int64Array::from(vec![12])),
        ),
        (
            "status",
            std::sync::Arc::new(arrow::array::StringArray::from(vec!["open"])),
        ),
        (
            "subject",
            std::sync::Arc::new(arrow::array::StringArray::from(vec!["Invoice address"])),
        ),
        (
            "body",
            std::sync::Arc::new(arrow::array::StringArray::from(vec![format!(
                "Please copy {} on the invoice.",
                email.to_lowercase()
            )])),
        ),
    ])
    .unwrap();
    append(
        &ws.warehouse,
        &lethe_iceberg::catalog::TableName::parse("support.tickets").unwrap(),
        &[ticket],
        Default::default(),
        WriteOptions::default(),
    )
    .await
    .unwrap();
    erase(ws, &[request(3590, "erasure-0001")], &erase_opts(), &|_| {})
        .await
        .unwrap();
    let out = demo.lethe(&[
        "attest",
        "--request",
        "erasure-0001",
        "--json",
        "--keep-case-file",
    ]);
    let a: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(a["mentions"]["support.tickets"]["rows"], 1);
    assert_eq!(
        a["mentions"]["support.tickets"]["keys"],
        serde_json::json!(["ticket_id=77777"])
    );
    // The mention is another learner's row: the plan keeps it, and the scan reports it.
    assert_eq!(a["verdict"]["physical"], "PENDING");
}

/// Issue 48: encrypted Parquet in a raw folder (written by PyArrow with a KMS, key material in
/// the files). Without keys the attestation is INCOMPLETE naming the master key; with
/// `[storage.encryption] keys_file` the scan decrypts the files and finds the subject in them
/// (it can see); once they hold only other people, the same scan finds them clean and the
/// attestation is COMPLETE. A key file others may read is refused, naming the fix.
#[tokio::test(flavor = "multi_thread")]
async fn encrypted_parquet_is_read_with_the_configured_master_keys() {
    let demo = Demo::new().await;
    erase(
        &demo.ws,
        &[request(3590, "erasure-0001")],
        &erase_opts(),
        &|_| {},
    )
    .await
    .unwrap();
    let case = read_case(&demo.ws, "erasure-0001").unwrap();
    let email = case.values.iter().find(|v| v.kind == "email").unwrap();
    let raw = demo.dir.join("raw/exports");
    std::fs::create_dir_all(&raw).unwrap();
    let write = |email: &str, id: &str| {
        let out = std::process::Command::new(crate::common::python())
            .arg(crate::common::interop_dir().join("write_encrypted_parquet.py"))
            .args([raw.as_os_str(), email.as_ref(), id.as_ref()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let keys = std::fs::read(raw.join("keys.txt")).unwrap();
        std::fs::remove_file(raw.join("keys.txt")).unwrap();
        keys
    };
    let keys = write(&email.value, "3590");
    let attest = |code: i32| -> (serde_json::Value, String) {
        let out = demo.lethe(&["attest", "--request", "erasure-0001", "--json"]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(code), "{stderr}");
        (
            serde_json::from_slice(&out.stdout).unwrap_or_default(),
            stderr,
        )
    };
    let (a, _) = attest(1);
    let remaining = a["verdict"]["remaining"].to_string();
    assert!(
        remaining.contains("encrypted_footer.parquet")
            && remaining.contains("no key configured for footer_key"),
        "{remaining}"
    );
    // The keys, configured.
    crate::common::write_private(&demo.dir.join("parquet-keys.txt"), &keys);
    let config = demo.dir.join("lethe.toml");
    let mut toml = std::fs::read_to_string(&config).unwrap();
    toml.push_str("\n[storage.encryption]\nkeys_file = \"parquet-keys.txt\"\n");
    std::fs::write(&config, toml).unwrap();
    let (a, _) = attest(1);
    let remaining = a["verdict"]["remaining"].to_string();
    for name in ["encrypted_footer", "plaintext_footer", "single_wrapped"] {
        let at = remaining
            .find(&format!("{name}.parquet"))
            .unwrap_or_else(|| panic!("{name}: {remaining}"));
        assert!(
            remaining[at..].contains("holds the subject"),
            "{name}: {remaining}"
        );
    }
    assert!(!remaining.contains("no key configured"), "{remaining}");
    // A key file its group may read is refused, naming it and the fix, never a key.
    use std::os::unix::fs::PermissionsExt;
    let key_file = demo.dir.join("parquet-keys.txt");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = demo.lethe(&["attest", "--request", "erasure-0001", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("parquet-keys.txt") && stderr.contains("chmod 600"),
        "{stderr}"
    );
    let secret = String::from_utf8(keys).unwrap();
    let b64 = secret.lines().next().unwrap().split(':').nth(1).unwrap();
    assert!(!stderr.contains(b64), "{stderr}");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    // The exports rewritten without the subject: read, clean, COMPLETE.
    write("someone@else.example", "12");
    let (a, _) = attest(0);
    assert_eq!(a["manifest"]["status"], "COMPLETE", "{a}");
    assert_eq!(a["verdict"]["remaining"], serde_json::json!([]), "{a}");
}
