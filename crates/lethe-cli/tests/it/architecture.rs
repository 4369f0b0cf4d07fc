//! docs/architecture.md draws the crate graph; this keeps it true.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

/// The workspace root (the manifest folder is read at run time, as `common::interop_dir`).
fn workspace_root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest.join("../..")
}

/// Edges between workspace crates as `cargo metadata --no-deps` reports them.
fn metadata_edges() -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = m["packages"].as_array().unwrap();
    let names: BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let mut edges = BTreeSet::new();
    for p in packages {
        for d in p["dependencies"].as_array().unwrap() {
            let to = d["name"].as_str().unwrap();
            if !names.contains(to) {
                continue;
            }
            let kind = match d["kind"].as_str() {
                Some("dev") => " (dev)",
                Some("build") => " (build)",
                _ => "",
            };
            edges.insert(format!("{} -> {to}{kind}", p["name"].as_str().unwrap()));
        }
    }
    edges
}

/// The edges listed between `<!-- edges -->` and `<!-- /edges -->` in docs/architecture.md.
fn documented_edges() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(workspace_root().join("docs/architecture.md")).unwrap();
    let start = doc.find("<!-- edges -->").expect("an edges block");
    let end = doc
        .find("<!-- /edges -->")
        .expect("the end of the edges block");
    doc[start..end]
        .lines()
        .filter(|l| l.contains(" -> "))
        .map(|l| l.trim().to_string())
        .collect()
}

#[test]
fn crate_graph_matches_cargo_metadata() {
    let actual = metadata_edges();
    let documented = documented_edges();
    assert_eq!(
        documented, actual,
        "docs/architecture.md's edges differ from cargo metadata"
    );
    // The layering the page promises: the table mechanics depend on no other workspace crate,
    // and nothing but the CLI depends on the demo.
    assert!(
        !actual.iter().any(|e| e.starts_with("lethe-iceberg ->")),
        "{actual:?}"
    );
    for e in &actual {
        if e.contains("-> lethe-demo") {
            assert!(e.starts_with("lethe-cli ->"), "{e}");
        }
    }
}

/// Issue 44 (item 18): nothing changes the process environment but `main` before its runtime
/// starts. `std::env::set_var` while other threads read the environment is undefined
/// behaviour, and tests run in parallel threads: a test passes configuration instead
/// (`lethe::stores::open_with`). Every Rust file of the workspace is read for the calls.
#[test]
fn nothing_but_main_changes_the_process_environment() {
    let root = workspace_root();
    let allowed = root.join("crates/lethe-cli/src/main.rs");
    // Spelled in two pieces so this file doesn't find itself.
    let needles = [["set", "_var("].concat(), ["remove", "_var("].concat()];
    let mut found = Vec::new();
    let mut stack = vec![root.join("crates")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") && p != allowed {
                let text = std::fs::read_to_string(&p).unwrap();
                for (i, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap_or("");
                    if needles.iter().any(|n| code.contains(n.as_str())) {
                        found.push(format!("{}:{}", p.display(), i + 1));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "these change the process environment: {found:#?}"
    );
}
