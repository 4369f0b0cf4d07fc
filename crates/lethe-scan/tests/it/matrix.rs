//! The canary matrix: one canary per place, each must be found in its place (100% recall),
//! and the same files without canaries give no hit (0 false positives).

use std::collections::HashSet;
use std::path::Path;

use lethe_scan::{
    FileFormat, FileStatus, IdTrace, IdValue, Place, ScanOptions, SubjectTraces, TraceKind,
    TraceSet, ValueTrace, scan, scan_bytes,
};
use parquet::file::metadata::KeyValue;

use crate::fixtures::{self, Builder, CANARIES, subjects};
use crate::{scan_dir, write_files};

fn relative(dir: &Path, p: &Path) -> String {
    p.strip_prefix(dir).unwrap().to_string_lossy().into_owned()
}

#[test]
fn every_canary_is_found_in_its_place() {
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &Builder { canaries: true }.files());
    let report = scan_dir(&traces, dir.path(), 2);
    if std::env::var_os("LETHE_SCAN_DUMP").is_some() {
        println!("{}", serde_json::to_string_pretty(&report).unwrap());
    }

    for f in &report.files {
        assert_eq!(
            f.status,
            FileStatus::Read,
            "{}: {:?}",
            f.path.display(),
            f.status
        );
    }
    let mut missing = Vec::new();
    for (subject, c) in CANARIES.iter().enumerate() {
        let file = report
            .files
            .iter()
            .find(|f| relative(dir.path(), &f.path) == c.file)
            .unwrap();
        let found = file.hits.iter().any(|h| {
            h.subject == subject
                && h.place == c.place
                && match (&h.trace, c.id) {
                    (TraceKind::Id { column }, Some((col, _))) => column == col,
                    (TraceKind::Value { kind }, None) => kind == c.kind,
                    _ => false,
                }
        });
        if !found {
            missing.push(format!(
                "subject {subject} ({:?} in {}): hits {:?}",
                c.place, c.file, file.hits
            ));
        }
        // No subject is found in a file other than its own.
        for other in &report.files {
            if relative(dir.path(), &other.path) != c.file {
                assert!(
                    !other.hits.iter().any(|h| h.subject == subject),
                    "subject {subject} unexpectedly in {}: {:?}",
                    other.path.display(),
                    other.hits
                );
            }
        }
    }
    assert!(missing.is_empty(), "not found:\n{}", missing.join("\n"));
    assert_eq!(report.unreadable, 0);
    assert_eq!(report.files_read, report.files.len() as u64);
    assert!(!report.is_clean());

    // Formats and the gzip flag.
    let format = |name: &str| {
        let f = report
            .files
            .iter()
            .find(|f| relative(dir.path(), &f.path) == name)
            .unwrap();
        (f.format, f.gzip)
    };
    assert_eq!(format(fixtures::DATA), (FileFormat::Parquet, false));
    assert_eq!(
        format(fixtures::MANIFEST),
        (FileFormat::IcebergManifest, false)
    );
    assert_eq!(
        format(fixtures::MANIFEST_LIST),
        (FileFormat::IcebergManifestList, false)
    );
    assert_eq!(format(fixtures::AVRO), (FileFormat::Avro, false));
    assert_eq!(format(fixtures::METADATA), (FileFormat::Json, false));
    assert_eq!(format(fixtures::GZ_METADATA), (FileFormat::Json, true));
    assert_eq!(format(fixtures::JSONL_GZ), (FileFormat::JsonLines, true));
    assert_eq!(format(fixtures::PUFFIN_A), (FileFormat::Puffin, false));
    assert_eq!(format(fixtures::CSV), (FileFormat::Csv, false));
    assert_eq!(format(fixtures::TEXT), (FileFormat::Text, false));
    assert_eq!(format(fixtures::CRC), (FileFormat::Crc, false));

    // The report never carries a canary value.
    let json = serde_json::to_string(&report).unwrap().to_lowercase();
    let debug = format!("{report:?}").to_lowercase();
    for c in CANARIES {
        if let Some(v) = c.value {
            let prefix: String = v.to_lowercase().chars().take(15).collect();
            assert!(!json.contains(&prefix), "report JSON holds {prefix}");
            assert!(!debug.contains(&prefix), "report Debug holds {prefix}");
        }
    }
}

#[test]
fn details_say_where() {
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &Builder { canaries: true }.files());
    let report = scan_dir(&traces, dir.path(), 1);
    let hits_of = |value: &str| {
        let s = fixtures::subject_of(value);
        report
            .files
            .iter()
            .flat_map(|f| f.hits.iter())
            .filter(|h| h.subject == s)
            .cloned()
            .collect::<Vec<_>>()
    };
    let deleted = hits_of("dddd.canary.deleted@ex.org");
    assert!(
        deleted
            .iter()
            .any(|h| h.detail.contains("DELETED") && h.detail.contains("lower_bounds")),
        "{deleted:?}"
    );
    let upper = hits_of("alexa590@post.example");
    assert!(
        upper
            .iter()
            .any(|h| h.detail.contains("upper_bounds") && h.detail.contains("`email`")),
        "{upper:?}"
    );
    let bloom = hits_of("3590");
    assert!(
        bloom
            .iter()
            .any(|h| h.place == Place::BloomFilter && h.detail.contains("learner_id"))
    );
    let page = hits_of("kkkk.canary.page@ex.org");
    assert!(
        page.iter()
            .any(|h| h.place == Place::PageIndex && h.detail.contains("page 1")),
        "{page:?}"
    );
    assert!(
        !page.iter().any(|h| h.place == Place::FooterStatistic),
        "page 1's min is not the chunk min"
    );
    let nested = hits_of("+44 7700 900123");
    assert!(
        nested.iter().any(|h| h.detail.contains("profile.phones")),
        "{nested:?}"
    );
    let csv = hits_of("8888");
    assert!(
        csv.iter().any(|h| h.detail.contains("data row 2")),
        "{csv:?}"
    );
    let text = hits_of("text.canary@ex.org");
    assert_eq!(text[0].detail, "line 2");
    let partition = hits_of("5151");
    assert!(
        partition
            .iter()
            .any(|h| h.detail.contains("partition.learner_id")),
        "{partition:?}"
    );
}

#[test]
fn files_without_canaries_give_no_hit() {
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &Builder { canaries: false }.files());
    let report = scan_dir(&traces, dir.path(), 2);
    for f in &report.files {
        assert_eq!(f.status, FileStatus::Read, "{}", f.path.display());
        assert!(f.hits.is_empty(), "{}: {:?}", f.path.display(), f.hits);
    }
    assert!(report.is_clean());
    assert_eq!(
        report.files.len(),
        Builder { canaries: false }.files().len()
    );
}

#[test]
fn values_only_paths_skip_id_traces() {
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &Builder { canaries: true }.files());
    let options = ScanOptions {
        roots: vec![dir.path().to_path_buf()],
        values_only: vec![dir.path().join("data"), dir.path().join("exports")],
        delete_files: HashSet::new(),
        threads: 2,
        ..ScanOptions::default()
    };
    let report = scan(&traces, &options, &|_| {}).unwrap();
    for f in &report.files {
        let rel = relative(dir.path(), &f.path);
        let ids = f
            .hits
            .iter()
            .filter(|h| matches!(h.trace, TraceKind::Id { .. }))
            .count();
        if rel.starts_with("data") || rel.starts_with("exports") {
            assert_eq!(ids, 0, "{rel}: {:?}", f.hits);
        }
        if rel == fixtures::MANIFEST {
            assert!(ids > 0, "manifests are not under a values-only prefix");
        }
    }
    // Values are still found there.
    let data = report
        .files
        .iter()
        .find(|f| relative(dir.path(), &f.path) == fixtures::DATA)
        .unwrap();
    assert!(data.hits.iter().any(|h| h.place == Place::DataValue));
}

#[test]
fn delete_type_metadata_marks_a_delete_file() {
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let bytes = fixtures::parquet_with_kv(vec![KeyValue::new(
        "delete-type".into(),
        "equality".to_string(),
    )]);
    let r = scan_bytes(&traces, "x.parquet", &bytes, false);
    assert!(
        r.hits.iter().any(|h| h.place == Place::DeleteFile),
        "{:?}",
        r.hits
    );
    let bytes = fixtures::parquet_with_kv(vec![KeyValue::new("other".into(), "x".to_string())]);
    let r = scan_bytes(&traces, "x.parquet", &bytes, false);
    assert!(r.hits.iter().all(|h| h.place != Place::DeleteFile) && !r.hits.is_empty());
}

#[test]
fn a_value_in_a_path_is_found() {
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("t/data/email=csv.canary@ex.org");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("part-0.txt"), b"nothing here").unwrap();
    let report = scan_dir(&traces, dir.path(), 1);
    let f = &report.files[0];
    assert_eq!(f.hits.len(), 1);
    assert_eq!(f.hits[0].place, Place::Path);
    assert_eq!(f.hits[0].subject, fixtures::subject_of("csv.canary@ex.org"));
}

#[test]
fn missing_root_is_an_error_without_values() {
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let options = ScanOptions {
        roots: vec!["/nonexistent/lethe-scan-root".into()],
        ..ScanOptions::default()
    };
    let err = scan(&traces, &options, &|_| {}).unwrap_err();
    assert!(matches!(err, lethe_scan::Error::RootNotFound { .. }));
    assert!(err.to_string().contains("/nonexistent/lethe-scan-root"));
}

#[cfg(unix)]
#[test]
fn symlinks_are_not_followed_out_of_roots() {
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), b"text.canary@ex.org").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), b"clean").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        dir.path().join("link.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink(dir.path().join("a.txt"), dir.path().join("inside.txt")).unwrap();
    let report = scan_dir(&traces, dir.path(), 1);
    let by_name = |n: &str| report.files.iter().find(|f| f.path.ends_with(n)).unwrap();
    assert!(by_name("link.txt").is_unreadable());
    assert_eq!(by_name("link.txt").format, FileFormat::Symlink);
    assert!(!by_name("inside.txt").is_unreadable());
    assert!(by_name("a.txt").hits.is_empty());
    assert_eq!(report.files_holding, 0);
    assert_eq!(report.unreadable, 1);
}

#[test]
fn progress_reaches_the_totals() {
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = Builder { canaries: false }.files();
    write_files(dir.path(), &files);
    let last = std::cell::Cell::new(None);
    let calls = std::cell::Cell::new(0);
    let options = ScanOptions {
        roots: vec![dir.path().to_path_buf()],
        threads: 3,
        ..ScanOptions::default()
    };
    scan(&traces, &options, &|p| {
        last.set(Some(p));
        calls.set(calls.get() + 1);
    })
    .unwrap();
    let p = last.get().unwrap();
    assert_eq!(calls.get(), files.len());
    assert_eq!(p.files_done, p.files_total);
    assert_eq!(p.bytes_done, p.bytes_total);
    assert_eq!(
        p.bytes_total,
        files.iter().map(|(_, b)| b.len() as u64).sum::<u64>()
    );
}

#[test]
fn debug_of_traces_hits_and_errors_holds_no_value() {
    let subject = SubjectTraces {
        label: "req".into(),
        ids: vec![IdTrace {
            column: "learner_id".into(),
            values: vec![IdValue::Text("CGB0000113".into())],
        }],
        values: vec![ValueTrace {
            kind: "email".into(),
            value: "Hidden.Person@example.org".into(),
        }],
    };
    let traces = TraceSet::new(std::slice::from_ref(&subject), 15).unwrap();
    let r = scan_bytes(
        &traces,
        "x.csv",
        b"learner_id,email\nCGB0000113,hidden.person@example.org\n",
        false,
    );
    assert_eq!(r.hits.len(), 2);
    // A reader error that quotes the value is withheld.
    let r2 = scan_bytes(
        &traces,
        "x.json",
        b"{\"a\": \"hidden.person@example.org\" oops",
        false,
    );
    assert!(r2.is_unreadable());
    let bad = TraceSet::new(
        &[SubjectTraces {
            values: vec![ValueTrace {
                kind: "email".into(),
                value: String::new(),
            }],
            ..subject.clone()
        }],
        15,
    )
    .unwrap_err();
    for text in [
        format!("{traces:?}"),
        format!("{subject:?}"),
        format!("{:?}", r.hits),
        format!("{r:?}"),
        format!("{r2:?}"),
        format!("{bad:?} {bad}"),
    ] {
        let low = text.to_lowercase();
        assert!(!low.contains("hidden.person"), "{text}");
        assert!(!low.contains("cgb0000113"), "{text}");
    }
}

#[test]
fn text_ids_match_exactly_in_structured_places() {
    let subject = SubjectTraces {
        label: "req".into(),
        ids: vec![IdTrace {
            column: "review_id".into(),
            values: vec![IdValue::Text("CGB0000113".into())],
        }],
        values: vec![],
    };
    let traces = TraceSet::new(&[subject], 15).unwrap();
    let hit = scan_bytes(
        &traces,
        "x.jsonl",
        b"{\"review_id\":\"CGB0000113\"}\n{\"review_id\":\"CGB00001130\"}\n",
        false,
    );
    assert_eq!(hit.hits.len(), 1);
    assert_eq!(hit.hits[0].count, 1);
    assert_eq!(hit.hits[0].detail, "line 1, /review_id");
    let other_key = scan_bytes(&traces, "x.jsonl", b"{\"note\":\"CGB0000113\"}\n", false);
    assert!(other_key.hits.is_empty(), "IDs are not free text");
}
