//! Fuzz `lethe_scan::scan_bytes`: the first input byte picks the file name (and so the
//! reader for content without magic bytes), the rest is the file's content. Any panic or
//! crash is a bug: the scanner must report malformed files as unreadable.
#![no_main]

use std::sync::OnceLock;

use lethe_scan::{IdTrace, IdValue, SubjectTraces, TraceSet, ValueTrace, scan_bytes};
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
];

fn traces() -> &'static TraceSet {
    static TRACES: OnceLock<TraceSet> = OnceLock::new();
    TRACES.get_or_init(|| {
        let subject = SubjectTraces {
            label: "fuzz".into(),
            ids: vec![
                IdTrace { column: "learner_id".into(), values: vec![IdValue::Int(3590)] },
                IdTrace { column: "review_id".into(), values: vec![IdValue::Text("CGB0000113".into())] },
            ],
            values: vec![
                ValueTrace { kind: "email".into(), value: "alexa590@post.example".into() },
                ValueTrace { kind: "full_name".into(), value: "Zoë Çelik".into() },
            ],
        };
        match TraceSet::new(&[subject], 15) {
            Ok(t) => t,
            Err(e) => panic!("fuzz traces: {e}"),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, content)) = data.split_first() else { return };
    let name = NAMES[usize::from(selector) % NAMES.len()];
    let _ = scan_bytes(traces(), name, content, selector & 0x80 != 0);
});
