//! One subject vs 1,000: the same hits for the one subject.

use lethe_scan::{IdTrace, IdValue, ScanReport, SubjectTraces, TraceSet, ValueTrace};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::fixtures::{Builder, CANARIES, subjects};
use crate::{scan_dir, write_files};

fn random_subject(rng: &mut StdRng) -> SubjectTraces {
    let word = |rng: &mut StdRng, n: usize| {
        (0..n)
            .map(|_| rng.random_range(b'a'..=b'z') as char)
            .collect::<String>()
    };
    SubjectTraces {
        label: "random".into(),
        ids: vec![
            IdTrace {
                column: "learner_id".into(),
                values: vec![IdValue::Int(rng.random_range(1_000_000..1_000_000_000))],
            },
            IdTrace {
                column: "review_id".into(),
                values: vec![IdValue::Text(format!("R{}", word(rng, 9)))],
            },
        ],
        values: vec![
            ValueTrace {
                kind: "email".into(),
                value: format!("{}@{}.example", word(rng, 10), word(rng, 6)),
            },
            ValueTrace {
                kind: "full_name".into(),
                value: format!("{} {}", word(rng, 7), word(rng, 9)),
            },
        ],
    }
}

fn hits_of(report: &ScanReport, subject: usize) -> Vec<String> {
    let mut v: Vec<String> = report
        .files
        .iter()
        .flat_map(|f| {
            f.hits
                .iter()
                .filter(move |h| h.subject == subject)
                .map(move |h| {
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

#[test]
fn one_subject_and_a_thousand_give_the_same_hits() {
    let seed = crate::seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &Builder { canaries: true }.files());

    let canaries = subjects();
    let mut many = canaries.clone();
    while many.len() < 1000 {
        many.push(random_subject(&mut rng));
    }
    let big = scan_dir(&TraceSet::new(&many, 15).unwrap(), dir.path(), 2);
    for s in 1000 - 972..1000 {
        assert!(hits_of(&big, s).is_empty(), "random subject {s} found");
    }
    for (k, subject) in canaries.iter().enumerate() {
        let alone = scan_dir(
            &TraceSet::new(std::slice::from_ref(subject), 15).unwrap(),
            dir.path(),
            2,
        );
        let a = hits_of(&alone, 0);
        assert!(
            !a.is_empty(),
            "canary {k} ({:?}) not found alone",
            CANARIES[k].place
        );
        assert_eq!(a, hits_of(&big, k), "canary {k}");
    }
}
