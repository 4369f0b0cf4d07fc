//! Integration tests of the proof scan: canary matrix, corruption, scale, redaction.

mod corruption;
mod fixtures;
mod matrix;
mod regression;
mod scale;

use std::collections::HashSet;
use std::path::Path;

use lethe_scan::{ScanOptions, ScanReport, TraceSet, scan};

/// Seed for randomized tests: `LETHE_SCAN_SEED` or a fixed default; always printed.
pub fn seed() -> u64 {
    let seed = std::env::var("LETHE_SCAN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_130);
    println!("seed: {seed} (set LETHE_SCAN_SEED to override)");
    seed
}

/// Write the fixture files under `dir`.
pub fn write_files(dir: &Path, files: &[(&str, Vec<u8>)]) {
    for (name, bytes) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
}

/// Scan `dir` marking the equality delete file as a delete file.
pub fn scan_dir(traces: &TraceSet, dir: &Path, threads: usize) -> ScanReport {
    let options = ScanOptions {
        roots: vec![dir.to_path_buf()],
        values_only: vec![],
        delete_files: HashSet::from([dir.join(fixtures::EQ_DELETE)]),
        threads,
        ..ScanOptions::default()
    };
    scan(traces, &options, &|_| {}).unwrap()
}
