//! Truncated and corrupted versions of every fixture: never a panic; truncated files of
//! formats with an end marker (Parquet, Puffin, gzip, JSON documents) are unreadable.

use lethe_scan::{FileStatus, TraceSet, scan_bytes};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::fixtures::{Builder, subjects};

fn strict(name: &str) -> bool {
    name.ends_with(".parquet")
        || name.ends_with(".puffin")
        || name.ends_with(".gz")
        || name.ends_with(".json")
}

fn panicked(status: &FileStatus) -> bool {
    matches!(status, FileStatus::Unreadable { reason } if reason.contains("panicked"))
}

#[test]
fn truncated_files_are_unreadable_and_never_panic() {
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let mut guarded = Vec::new();
    for (name, bytes) in (Builder { canaries: true }).files() {
        let len = bytes.len();
        let mut cuts: Vec<usize> = (1..8).map(|k| len * k / 8).collect();
        cuts.extend(
            [1, 2, 3, 4, 5, 8, 12, 16, 20]
                .iter()
                .filter_map(|d| len.checked_sub(*d)),
        );
        cuts.sort_unstable();
        cuts.dedup();
        for cut in cuts {
            if cut == 0 {
                continue;
            }
            let r = scan_bytes(&traces, name, &bytes[..cut], false);
            if panicked(&r.status) {
                guarded.push(format!("{name} cut at {cut}"));
            }
            if strict(name) {
                assert!(
                    r.is_unreadable(),
                    "{name} truncated to {cut} of {len} bytes was read: {:?}",
                    r.format
                );
            }
        }
    }
    assert!(
        guarded.is_empty(),
        "readers panicked (caught) on: {guarded:?}"
    );
}

#[test]
fn flipped_bytes_never_panic() {
    let seed = crate::seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let mut guarded = Vec::new();
    for (name, bytes) in (Builder { canaries: true }).files() {
        for round in 0..60 {
            let mut b = bytes.clone();
            let flips = rng.random_range(1..=4);
            for _ in 0..flips {
                let i = rng.random_range(0..b.len());
                b[i] ^= 1 << rng.random_range(0..8);
            }
            let r = scan_bytes(&traces, name, &b, false);
            if panicked(&r.status) {
                guarded.push(format!("{name} round {round}"));
            }
        }
    }
    // Panics inside third-party readers are caught (the file is unreadable); list them.
    if !guarded.is_empty() {
        println!("caught reader panics (seed {seed}): {guarded:?}");
    }
    assert!(guarded.len() <= 3, "too many caught panics: {guarded:?}");
}

#[test]
fn garbage_under_every_name_never_panics() {
    let seed = crate::seed();
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    let traces = TraceSet::new(&subjects(), 15).unwrap();
    let names = [
        "x.parquet",
        "x.avro",
        "x.metadata.json",
        "x.puffin",
        "x.gz",
        "x.csv",
        "x.txt",
        "x.jsonl",
    ];
    let magics: [&[u8]; 6] = [
        b"PAR1",
        b"Obj\x01",
        b"PFA1",
        &[0x1f, 0x8b, 8, 0],
        b"crc\0",
        b"{",
    ];
    for round in 0..400 {
        let len = rng.random_range(0..300);
        let mut b: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let magic = magics[round % magics.len()];
        b.splice(0..0, magic.iter().copied());
        if round % 3 == 0 {
            b.extend_from_slice(magic);
        }
        for name in names {
            let _ = scan_bytes(&traces, name, &b, round % 2 == 0);
        }
    }
}

/// Writes the fixtures as a fuzzing seed corpus when `LETHE_SCAN_WRITE_CORPUS` names a
/// folder (the fuzz target's first byte picks the file name; see /fuzz).
#[test]
fn write_fuzz_corpus_when_asked() {
    let Some(dir) = std::env::var_os("LETHE_SCAN_WRITE_CORPUS") else {
        return;
    };
    let names = [
        "x.parquet",
        "x.avro",
        "x.metadata.json",
        "x.puffin",
        "x.gz",
        "x.csv",
        "x.txt",
        "x.jsonl",
    ];
    std::fs::create_dir_all(&dir).unwrap();
    for (i, (name, bytes)) in (Builder { canaries: true }).files().into_iter().enumerate() {
        let ext = name.rsplit('.').next().unwrap();
        let selector = match ext {
            "parquet" => 0,
            "avro" => 1,
            "json" => 2,
            "puffin" => 3,
            "gz" => 4,
            "csv" => 5,
            "jsonl" => 7,
            _ => 6,
        };
        assert!(selector < names.len());
        let mut data = vec![selector as u8];
        data.extend_from_slice(&bytes);
        std::fs::write(std::path::Path::new(&dir).join(format!("seed-{i}")), data).unwrap();
    }
}
