//! Benchmark of the proof scan.
//!
//! ```text
//! cargo run --release -p lethe-scan --example scan_bench -- <folder> [subjects=1000] [threads=0] [seed]
//! ```
//!
//! Scans `<folder>` twice: with subject 0 alone (real-looking traces: `learner_id` 3590,
//! `review_id` 1199, an email, a name, a phone, an address) and with `subjects` subjects
//! (subject 0 plus random ones), and prints files, bytes, seconds and bytes/s for each, the
//! cost ratio (target: at most 1.5), and whether subject 0's hits are the same both times.

use std::time::Instant;

use lethe_scan::{
    IdTrace, IdValue, ScanOptions, ScanReport, SubjectTraces, TraceSet, ValueTrace, scan,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn subject_zero() -> SubjectTraces {
    SubjectTraces {
        label: "subject-0".into(),
        ids: vec![
            IdTrace {
                column: "learner_id".into(),
                values: vec![IdValue::Int(3590)],
            },
            IdTrace {
                column: "review_id".into(),
                values: vec![IdValue::Int(1199)],
            },
        ],
        values: vec![
            ValueTrace {
                kind: "email".into(),
                value: "alexa590@post.example".into(),
            },
            ValueTrace {
                kind: "full_name".into(),
                value: "Alexa Lindqvist".into(),
            },
            ValueTrace {
                kind: "phone".into(),
                value: "+46 70 123 45 90".into(),
            },
            ValueTrace {
                kind: "street_address".into(),
                value: "Storgatan 12, Uppsala".into(),
            },
        ],
    }
}

fn random_subject(rng: &mut StdRng, i: usize) -> SubjectTraces {
    let word = |rng: &mut StdRng, n: usize| {
        (0..n)
            .map(|_| rng.random_range(b'a'..=b'z') as char)
            .collect::<String>()
    };
    SubjectTraces {
        label: format!("subject-{i}"),
        ids: vec![
            IdTrace {
                column: "learner_id".into(),
                values: vec![IdValue::Int(rng.random_range(1_000_000..i64::MAX))],
            },
            IdTrace {
                column: "review_id".into(),
                values: vec![IdValue::Text(format!("R{}", word(rng, 10)))],
            },
        ],
        values: vec![
            ValueTrace {
                kind: "email".into(),
                value: format!("{}{}@{}.example", word(rng, 8), i, word(rng, 6)),
            },
            ValueTrace {
                kind: "full_name".into(),
                value: format!("{} {}", word(rng, 6), word(rng, 9)),
            },
            ValueTrace {
                kind: "phone".into(),
                value: format!(
                    "+{} {}",
                    rng.random_range(10..99),
                    rng.random_range(10_000_000u64..99_999_999)
                ),
            },
            ValueTrace {
                kind: "street_address".into(),
                value: format!("{} {}", rng.random_range(1..300), word(rng, 12)),
            },
        ],
    }
}

fn run(
    label: &str,
    subjects: &[SubjectTraces],
    options: &ScanOptions,
) -> Result<(ScanReport, f64), String> {
    let traces = TraceSet::new(subjects, 15).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let report = scan(&traces, options, &|_| {}).map_err(|e| e.to_string())?;
    let secs = start.elapsed().as_secs_f64();
    let bytes: u64 = report.files.iter().map(|f| f.bytes).sum();
    println!(
        "{label}: subjects {} files {} bytes {} seconds {:.3} bytes/s {:.0} unreadable {} holding {}",
        subjects.len(),
        report.files.len(),
        bytes,
        secs,
        bytes as f64 / secs.max(1e-9),
        report.unreadable,
        report.files_holding,
    );
    Ok((report, secs))
}

fn hits_of_zero(r: &ScanReport) -> Vec<String> {
    let mut v: Vec<String> = r
        .files
        .iter()
        .flat_map(|f| {
            f.hits.iter().filter(|h| h.subject == 0).map(move |h| {
                format!(
                    "{} {:?} {:?} {} {}",
                    f.path.display(),
                    h.place,
                    h.trace,
                    h.detail,
                    h.count
                )
            })
        })
        .collect();
    v.sort();
    v
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(folder) = args.first() else {
        return Err("usage: scan_bench <folder> [subjects=1000] [threads=0] [seed]".into());
    };
    let n: usize = args
        .get(1)
        .map(|s| s.parse().map_err(|_| "subjects must be a number"))
        .transpose()?
        .unwrap_or(1000);
    let threads: usize = args
        .get(2)
        .map(|s| s.parse().map_err(|_| "threads must be a number"))
        .transpose()?
        .unwrap_or(0);
    let seed: u64 = args
        .get(3)
        .map(|s| s.parse().map_err(|_| "seed must be a number"))
        .transpose()?
        .unwrap_or(42);
    println!("seed {seed}");
    let options = ScanOptions {
        roots: vec![folder.into()],
        threads,
        ..ScanOptions::default()
    };

    let mut rng = StdRng::seed_from_u64(seed);
    let mut many = vec![subject_zero()];
    for i in 1..n.max(1) {
        many.push(random_subject(&mut rng, i));
    }
    // Warm the page cache so the first run is not penalised.
    run("warm-up", &many[..1], &options)?;
    let (one, t1) = run("one subject", &many[..1], &options)?;
    let (all, tn) = run("all subjects", &many, &options)?;
    println!("cost ratio {:.2} (target <= 1.5)", tn / t1.max(1e-9));
    let same = hits_of_zero(&one) == hits_of_zero(&all);
    println!(
        "subject 0 hits: {} (same with {} subjects: {same})",
        hits_of_zero(&one).len(),
        many.len()
    );
    for f in one.files.iter().filter(|f| f.is_unreadable()).take(20) {
        println!("unreadable: {} {:?}", f.path.display(), f.status);
    }
    Ok(())
}
