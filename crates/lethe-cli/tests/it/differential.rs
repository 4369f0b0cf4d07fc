//! Issue 43 item 7: a randomized differential test of the whole claim.
//!
//! `tests/interop/random_warehouse.py make` writes warehouses of random shape with PyIceberg
//! (a root table `crm.customers` and 2-5 tables addressing the customer through several
//! columns at once, each null in some rows: the ID by name, a copy of it declared in
//! metadata.toml or by an OpenLineage IDENTITY edge, derived `a-{id}` / `a-{id}#*` patterns, and
//! SHA-256 / MD5 hashes declared with `transform`; random partitioning, several snapshots,
//! PyIceberg deletes; now and then a tag, a branch or `min-snapshots-to-keep = 3`, which must
//! make lethe refuse — or, in half of those shapes, which retention.toml tells lethe to
//! rewrite: every ref must then still read its rows but the erased customers'). Each shape is erased by the `lethe` binary in one batch (`erase
//! --subjects-file`; lethe's own logical check after it must find nothing, and the attestation
//! of the batch's first request must say logical erasure COMPLETE), then
//! `random_warehouse.py check` — PyIceberg and matching written
//! independently of lethe — reads every snapshot every table still keeps: none may hold a row
//! that addresses an erased customer, the current snapshot's other rows must be exactly the
//! ones before, and a shape lethe had to refuse must be unchanged.
//!
//! Run (needs `LETHE_PYTHON`, see `scripts/python-env.sh`):
//!
//! ```sh
//! cargo test -p lethe-cli --features lethe-cli/failpoints --test it -- differential --nocapture
//! ```
//!
//! Settings (environment): `LETHE_DIFF_SEED` (default: random; always printed, with the
//! command that replays it), `LETHE_DIFF_SHAPES` (default 24), `LETHE_DIFF_SUBJECTS` per shape
//! (default 8, at least 4), `LETHE_DIFF_TRANSFORMS=0` to leave out the hashed identifiers (a
//! lethe that doesn't read `transform` stops at metadata.toml, exit 2, on every shape that has
//! one; without them the rest of the claim is still tested),
//! `LETHE_DIFF_DIR` to write the warehouses there and keep them (they are also kept, and
//! named, when the test fails). A long run, 10,000 subjects:
//!
//! ```sh
//! LETHE_DIFF_SHAPES=500 LETHE_DIFF_SUBJECTS=20 cargo test --release -p lethe-cli \
//!   --features lethe-cli/failpoints --test it -- differential --nocapture
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{interop_dir, python};

const KEY: &str = "differential-test-register-key-0123456789abcdef";

/// The test's size and seed, from the environment.
struct Settings {
    seed: u64,
    shapes: usize,
    subjects: usize,
    transforms: bool,
}

impl Settings {
    fn from_env() -> Settings {
        let num = |name: &str, default: u64| -> u64 {
            match std::env::var(name) {
                Ok(v) => v
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}={v} is not a whole number")),
                Err(_) => default,
            }
        };
        Settings {
            seed: num("LETHE_DIFF_SEED", rand::random::<u32>() as u64),
            shapes: num("LETHE_DIFF_SHAPES", 24) as usize,
            subjects: num("LETHE_DIFF_SUBJECTS", 8) as usize,
            transforms: std::env::var("LETHE_DIFF_TRANSFORMS").map_or(true, |v| v != "0"),
        }
    }

    /// The command that replays this run.
    fn replay(&self) -> String {
        format!(
            "LETHE_DIFF_SEED={} LETHE_DIFF_SHAPES={} LETHE_DIFF_SUBJECTS={}{} cargo test -p lethe-cli --features lethe-cli/failpoints --test it -- differential --nocapture",
            self.seed,
            self.shapes,
            self.subjects,
            if self.transforms {
                ""
            } else {
                " LETHE_DIFF_TRANSFORMS=0"
            }
        )
    }
}

/// Runs `random_warehouse.py` with `args`; returns its output (not asserted).
fn script(args: &[&str]) -> Output {
    Command::new(python())
        .arg(interop_dir().join("random_warehouse.py"))
        .args(args)
        .output()
        .expect("run python")
}

/// Runs the `lethe` binary in `dir` with the register key set.
fn lethe(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lethe"))
        .args(args)
        .current_dir(dir)
        .env_remove("LETHE_CONFIG")
        .env_remove("LETHE_REGISTER_KEY_FILE")
        .env("LETHE_REGISTER_KEY", KEY)
        .output()
        .expect("run lethe")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The last `n` characters of `s` (error output can be long).
fn tail(s: &str, n: usize) -> &str {
    let mut at = s.len().saturating_sub(n);
    while !s.is_char_boundary(at) {
        at += 1;
    }
    &s[at..]
}

/// What lethe did with one shape.
struct Erased {
    shape: usize,
    /// Why the run is not what the shape expects, if it isn't.
    wrong: Option<String>,
    /// Per step of the journal: `table by column: rows` (empty when lethe refused or failed).
    steps: Vec<String>,
    took: Duration,
}

/// `lethe init` for one shape in `<shape>/lethe`, its governance and lineage copied in, one
/// batch erasure of the shape's customers to erase; checks the exit code against the shape.
fn erase_shape(i: usize, dir: &Path) -> Erased {
    let started = Instant::now();
    let shape: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("shape.json")).unwrap())
            .expect("shape.json");
    let home = dir.join("lethe");
    std::fs::create_dir_all(&home).unwrap();
    let catalog = format!("sqlite:///{}", dir.join("catalog.db").display());
    let warehouse = dir.join("warehouse").display().to_string();
    let fail = |why: String| Erased {
        shape: i,
        wrong: Some(why),
        steps: Vec::new(),
        took: started.elapsed(),
    };
    let out = lethe(
        &home,
        &["init", "--catalog", &catalog, "--warehouse", &warehouse],
    );
    if !out.status.success() {
        return fail(format!(
            "lethe init exited {:?}: {}",
            out.status.code(),
            tail(&text(&out.stderr), 2000)
        ));
    }
    for f in ["subjects.toml", "metadata.toml", "retention.toml"] {
        if dir.join("gov").join(f).exists() {
            std::fs::copy(dir.join("gov").join(f), home.join("governance").join(f)).unwrap();
        }
    }
    for e in std::fs::read_dir(dir.join("gov/lineage")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, home.join("lineage").join(p.file_name().unwrap())).unwrap();
    }
    let subject = shape["subject"].as_str().unwrap();
    let batch: String = shape["erase"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(n, id)| format!("erasure-{i}-{n} {subject}={}\n", id.as_str().unwrap()))
        .collect();
    let file = home.join("erase.txt");
    std::fs::write(&file, batch).unwrap();
    let out = lethe(
        &home,
        &[
            "erase",
            "--subjects-file",
            &file.display().to_string(),
            "--min-age",
            "0",
            "--json",
        ],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let refuse = &shape["refuse"];
    let wrong = if refuse.is_null() {
        (out.status.code() != Some(0)).then(|| {
            format!(
                "lethe erase exited {:?} (expected 0): {}",
                out.status.code(),
                tail(stderr.trim(), 600)
            )
        })
    } else if out.status.code() != Some(1)
        || !stderr.contains("refused")
        || !stderr.contains(refuse["table"].as_str().unwrap())
    {
        Some(format!(
            "the shape has a {} on {}: lethe erase must refuse naming it (exit 1), it exited {:?}: {}",
            refuse["kind"].as_str().unwrap(),
            refuse["table"].as_str().unwrap(),
            out.status.code(),
            tail(stderr.trim(), 600)
        ))
    } else {
        None
    };
    let report = serde_json::from_str::<serde_json::Value>(&stdout).ok();
    // lethe's own claims, checked against PyIceberg by `check` afterwards: its logical check
    // after the erasure found nothing in any kept snapshot, and the attestation of the batch's
    // first request says logical erasure COMPLETE.
    let wrong = wrong.or_else(|| {
        if !refuse.is_null() {
            return None;
        }
        let Some(logical) = report
            .as_ref()
            .and_then(|r| r["journal"]["logical"].as_array().cloned())
        else {
            return Some("lethe erase printed no logical check".to_string());
        };
        let left: Vec<String> = logical
            .iter()
            .flat_map(|t| {
                t["snapshots"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|s| s["rows"].as_u64() != Some(0))
                    .map(move |s| {
                        format!(
                            "{} snapshot {}: {}",
                            t["table"], s["snapshot_id"], s["rows"]
                        )
                    })
            })
            .collect();
        if !left.is_empty() {
            return Some(format!("lethe's logical check found rows left: {left:?}"));
        }
        let out = lethe(
            &home,
            &[
                "attest",
                "--request",
                &format!("erasure-{i}-0"),
                "--json",
                "--keep-case-file",
            ],
        );
        let Ok(a) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
            return Some(format!(
                "lethe attest printed no attestation: {}",
                tail(text(&out.stderr).trim(), 600)
            ));
        };
        (a["verdict"]["logical"] != "COMPLETE").then(|| {
            format!(
                "the attestation says logical {}: {}",
                a["verdict"]["logical"], a["verdict"]["remaining"]
            )
        })
    });
    let steps = report
        .as_ref()
        .and_then(|r| r["journal"]["steps"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|s| {
            format!(
                "{} {} by {}: {} rows",
                s["table"].as_str().unwrap_or("?"),
                s["action"].as_str().unwrap_or("?"),
                s["column"].as_str().unwrap_or("-"),
                s["rows"]
            )
        })
        .collect();
    Erased {
        shape: i,
        wrong,
        steps,
        took: started.elapsed(),
    }
}

/// The failures of one shape in `check`'s report, one line each.
fn failure_lines(result: &serde_json::Value) -> Vec<String> {
    result["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            if let Some(col) = f["column"].as_str() {
                format!(
                    "{} snapshot {}{}: {} row(s) of erased customers by `{col}` ({}), ids {}, other addressing columns null: {}",
                    f["table"].as_str().unwrap(),
                    f["snapshot"],
                    if f["current"] == true {
                        " (current)"
                    } else {
                        ""
                    },
                    f["count"],
                    f["role"].as_str().unwrap(),
                    f["ids"],
                    f["others_null"]
                )
            } else {
                format!("{} {}", f["table"].as_str().unwrap(), f)
            }
        })
        .collect()
}

/// Where the shapes go: `LETHE_DIFF_DIR` (kept), or a temporary folder kept on failure.
fn workdir() -> (PathBuf, Option<tempfile::TempDir>) {
    match std::env::var_os("LETHE_DIFF_DIR") {
        Some(d) => {
            let d = PathBuf::from(d);
            assert!(
                !d.exists() || std::fs::read_dir(&d).unwrap().next().is_none(),
                "LETHE_DIFF_DIR={} must be empty or not exist",
                d.display()
            );
            std::fs::create_dir_all(&d).unwrap();
            (d, None)
        }
        None => {
            let t = tempfile::tempdir().unwrap();
            (t.path().to_path_buf(), Some(t))
        }
    }
}

/// Random warehouses, random customers erased in one batch: no snapshot any table keeps holds
/// a row addressing an erased customer, every other row of the current snapshot is unchanged,
/// and shapes whose settings keep history are refused untouched.
#[test]
fn random_warehouses_keep_no_row_of_an_erased_subject_and_every_other_row() {
    let s = Settings::from_env();
    eprintln!(
        "differential: seed {} ({} shapes x {} subjects); replay with:\n  {}",
        s.seed,
        s.shapes,
        s.subjects,
        s.replay()
    );
    let (out, tmp) = workdir();
    let out_s = out.display().to_string();

    let t = Instant::now();
    let (seed, shapes, subjects) = (
        s.seed.to_string(),
        s.shapes.to_string(),
        s.subjects.to_string(),
    );
    let mut args = vec![
        "make",
        &out_s,
        "--seed",
        &seed,
        "--shapes",
        &shapes,
        "--subjects",
        &subjects,
    ];
    if !s.transforms {
        args.push("--no-transforms");
    }
    let made = script(&args);
    assert!(
        made.status.success(),
        "random_warehouse.py make failed (seed {}):\n{}\n{}",
        s.seed,
        text(&made.stdout),
        text(&made.stderr)
    );
    let make_time = t.elapsed();

    // One lethe erasure per shape, shapes in parallel.
    let t = Instant::now();
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .clamp(1, 8);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= s.shapes {
                        break;
                    }
                    let e = erase_shape(i, &out.join(format!("shape-{i}")));
                    done.lock().unwrap().push(e);
                }
            });
        }
    });
    let mut erased = done.into_inner().unwrap();
    erased.sort_by_key(|e| e.shape);
    let erase_time = t.elapsed();
    let slowest = erased.iter().map(|e| e.took).max().unwrap_or_default();

    let t = Instant::now();
    let checked = script(&["check", &out_s]);
    let check_time = t.elapsed();
    let report: serde_json::Value = serde_json::from_slice(&checked.stdout).unwrap_or_else(|e| {
        panic!(
            "random_warehouse.py check printed no JSON ({e}; seed {}):\n{}\n{}",
            s.seed,
            text(&checked.stdout),
            text(&checked.stderr)
        )
    });
    eprintln!(
        "differential: seed {}: make {:.1}s, erase {:.1}s ({workers} in parallel, slowest shape {:.1}s), check {:.1}s ({} snapshots read, {} shapes refusing, {} rewriting a table's kept history)",
        s.seed,
        make_time.as_secs_f64(),
        erase_time.as_secs_f64(),
        slowest.as_secs_f64(),
        check_time.as_secs_f64(),
        report["snapshots_read"],
        report["refusing"],
        report["rewriting"]
    );

    // Every shape that went wrong, with what lethe did to it.
    let mut problems = Vec::new();
    for (e, r) in erased.iter().zip(report["results"].as_array().unwrap()) {
        assert_eq!(r["shape"].as_u64(), Some(e.shape as u64));
        if e.wrong.is_none() && r["ok"] == true {
            continue;
        }
        let mut p = format!("shape {} ({}):", e.shape, r["dir"].as_str().unwrap());
        if let Some(w) = &e.wrong {
            p.push_str(&format!("\n  erase: {w}"));
        }
        // After a failed erasure the check's findings are its consequence: a few suffice.
        let lines = failure_lines(r);
        let shown = if e.wrong.is_some() { 3 } else { 40 };
        for l in lines.iter().take(shown) {
            p.push_str(&format!("\n  check: {l}"));
        }
        if lines.len() > shown {
            p.push_str(&format!(
                "\n  check: ... and {} more finding(s)",
                lines.len() - shown
            ));
        }
        for st in &e.steps {
            p.push_str(&format!("\n  lethe: {st}"));
        }
        problems.push(p);
    }
    let passed = checked.status.success() && report["ok"] == true && problems.is_empty();
    if !passed {
        // Keep the warehouses to look at.
        let kept = tmp.map_or(out.clone(), |t| t.keep());
        panic!(
            "differential: seed {}: {} of {} shapes failed (warehouses kept in {}); replay with\n  {}\nto rebuild one shape: python tests/interop/random_warehouse.py make DIR --seed {} --subjects {}{} --only N\n\n{}",
            s.seed,
            problems.len(),
            s.shapes,
            kept.display(),
            s.replay(),
            s.seed,
            s.subjects,
            if s.transforms { "" } else { " --no-transforms" },
            problems.join("\n\n")
        );
    }
}
