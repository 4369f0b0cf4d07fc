//! Fuzz `lethe_scan::scan_bytes`: the first input byte's low six bits pick the file name (and
//! so the reader for content without magic bytes), bit 0x80 values-only, bit 0x40 one subject
//! or a crowd of 300 (the byte search's gram filters); the rest is the file's content. The
//! scan dispatches by content, so every reader is reached from any name: Parquet (encrypted
//! ones refused by their footer), ORC, Avro, Puffin, JSON, CSV, text in UTF-8 or UTF-16,
//! gzip/zstd/xz streams and zip/tar archives, whose members come back to the same dispatch. Any panic
//! or crash is a bug: the scanner must report malformed files as unreadable. For Parquet the
//! byte search is compared with decoding every value (`scan_bytes_reference`): when the
//! reference reads the file, the search must too, with the same hits.
//!
//! A panic inside a third-party reader (parquet-rs, arrow, apache-avro, orc-rust, zip, tar: a
//! file under the cargo registry, or the standard library called from one, e.g. a capacity
//! overflow of a `Vec::with_capacity` in orc-rust) on corrupt bytes is caught by the scan's
//! guard and the file reported unreadable, which fails the proof closed; the target lets such a panic unwind to that
//! guard, printing its location once ("caught third-party panic at ..."), so the run goes on
//! and the log lists every such site for review. Every other panic (lethe-scan's own code,
//! one the guard did not catch) and every disagreement with the reference aborts as usual.
#![no_main]

use std::collections::HashSet;
use std::sync::{Mutex, Once, OnceLock};

use lethe_scan::{
    FileStatus, IdTrace, IdValue, SubjectTraces, TraceSet, ValueTrace, scan_bytes,
    scan_bytes_reference,
};
use libfuzzer_sys::fuzz_target;

const NAMES: &[&str] = &[
    "x.parquet",
    "x.avro",
    "x.metadata.json",
    "x.puffin",
    "x.gz",
    "x.csv",
    "x.txt",
    "x.jsonl",
    "x.zip",
    "x.tar",
    "x.orc",
    "x.csv.zst",
];

fn subject() -> SubjectTraces {
    SubjectTraces {
        label: "fuzz".into(),
        ids: vec![
            IdTrace {
                column: "learner_id".into(),
                values: vec![IdValue::Int(3590)],
            },
            IdTrace {
                column: "review_id".into(),
                values: vec![IdValue::Text("CGB0000113".into())],
            },
        ],
        values: vec![
            ValueTrace {
                kind: "email".into(),
                value: "alexa590@post.example".into(),
            },
            ValueTrace {
                kind: "full_name".into(),
                value: "Zoë Çelik".into(),
            },
        ],
    }
}

fn traces(crowd: bool) -> &'static TraceSet {
    static ONE: OnceLock<TraceSet> = OnceLock::new();
    static CROWD: OnceLock<TraceSet> = OnceLock::new();
    let build = |n: u64| {
        let mut subjects = vec![subject()];
        for i in 1..n {
            // Deterministic values of every length class (under 8, 8-10, 11-14, 15+ bytes).
            let len = 4 + (i * 7 % 26) as usize;
            let value: String = (0..len)
                .map(|k| (b'a' + ((i * 31 + k as u64 * 17) % 26) as u8) as char)
                .collect();
            subjects.push(SubjectTraces {
                label: format!("crowd-{i}"),
                ids: vec![IdTrace {
                    column: "learner_id".into(),
                    values: vec![IdValue::Int(1_000_000 + i as i64 * 7919)],
                }],
                values: vec![ValueTrace {
                    kind: "email".into(),
                    value,
                }],
            });
        }
        match TraceSet::new(&subjects, 15) {
            Ok(t) => t,
            Err(e) => panic!("fuzz traces: {e}"),
        }
    };
    if crowd {
        CROWD.get_or_init(|| build(300))
    } else {
        ONE.get_or_init(|| build(1))
    }
}

/// Replace libfuzzer-sys's abort-on-every-panic hook by one that lets third-party readers'
/// panics unwind to the scan's guard (see the module docs) and aborts on any other.
fn guard_third_party_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let abort_hook = std::panic::take_hook();
        let seen: Mutex<HashSet<String>> = Mutex::new(HashSet::new());
        std::panic::set_hook(Box::new(move |info| {
            let site = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()))
                .unwrap_or_default();
            if site.contains("/.cargo/registry/")
                || (site.starts_with("/rustc/") && called_from_third_party())
            {
                if seen.lock().is_ok_and(|mut s| s.insert(site.clone())) {
                    eprintln!("caught third-party panic at {site}: {info}");
                }
                return;
            }
            abort_hook(info);
        }));
    });
}

/// For a panic raised inside the standard library: true when the first frame outside it (and
/// outside this hook) is a third-party crate's.
fn called_from_third_party() -> bool {
    let trace = std::backtrace::Backtrace::force_capture().to_string();
    trace
        .lines()
        .filter_map(|l| l.trim().strip_prefix("at "))
        .find(|at| !at.starts_with("/rustc/") && !at.contains("fuzz_targets/scan_bytes.rs"))
        .is_some_and(|at| at.contains("/.cargo/registry/"))
}

fuzz_target!(|data: &[u8]| {
    guard_third_party_panics();
    let Some((&selector, content)) = data.split_first() else {
        return;
    };
    let name = NAMES[usize::from(selector & 0x3f) % NAMES.len()];
    let (values_only, traces) = (selector & 0x80 != 0, traces(selector & 0x40 != 0));
    let report = scan_bytes(traces, name, content, values_only);
    if content.starts_with(b"PAR1") {
        let reference = scan_bytes_reference(traces, name, content, values_only);
        if reference.status == FileStatus::Read {
            assert_eq!(
                report.status,
                FileStatus::Read,
                "the reference read the file"
            );
            assert_eq!(
                (&report.hits, report.hits_omitted),
                (&reference.hits, reference.hits_omitted)
            );
        }
    }
});
