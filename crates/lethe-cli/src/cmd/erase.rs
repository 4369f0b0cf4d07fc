//! `lethe erase`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use lethe::erasure::case::{RequestSpec, parse_subjects_file};
use lethe::erasure::erase::{EraseOptions, erase as run_erase, find_request};
use lethe::erasure::plan::Action;
use lethe::governance::subjects::SubjectRef;
use lethe_iceberg::clock::parse_duration;

use crate::out;

/// Arguments of `lethe erase`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("who").required(true).multiple(true).args(["subject", "subjects_file", "resume", "request"])))]
pub struct EraseArgs {
    /// The subject, as NAME=ID (e.g. learner=3590); opens the request when it has no record.
    #[arg(long, requires = "request")]
    subject: Option<String>,
    /// The request ID recorded in every commit and in the register (e.g. erasure-0001). Alone,
    /// it erases a request opened with `lethe request open` (and, once its legal holds have
    /// ended, finishes the steps they held).
    #[arg(long)]
    request: Option<String>,
    /// The day legal holds are judged on, and a new request's received day (YYYY-MM-DD;
    /// default: today). A day after today is refused: holds are never judged ahead of time.
    #[arg(long, value_name = "DAY")]
    day: Option<String>,
    /// Erase many subjects in one pass: one `REQUEST NAME=ID` per line.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["subject", "request"])]
    subjects_file: Option<PathBuf>,
    /// Resume an erasure that stopped, by request ID (an unknown request is an error).
    #[arg(long, value_name = "REQUEST", conflicts_with_all = ["subject", "subjects_file", "request"])]
    resume: Option<String>,
    /// Plan, resolve and report; write nothing (no case file, register entry or commit).
    #[arg(long)]
    dry_run: bool,
    /// The sweep's minimum file age (default: governance/retention.toml [sweep], 72h). Use 0
    /// only when a single process writes the catalog.
    #[arg(long, value_parser = super::duration_flag)]
    min_age: Option<String>,
    /// Erase what can be erased although some tables are UNRESOLVED.
    #[arg(long)]
    accept_incomplete: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: super::cluster::EngineArgs,
}

pub async fn erase(a: EraseArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let (engines, cluster) = a.engine.engines(&ws)?;
    let ws = ws.with_engines(engines);
    let requests: Vec<RequestSpec> = if let Some(r) = &a.resume {
        match find_request(&ws, r)? {
            Some(mut j) if j.is_finished() => {
                let quiet = a.json;
                let ran = lethe::erasure::erase::run_pending_cleanup(
                    &ws,
                    &mut j,
                    &out::progress_unless(quiet),
                )
                .await?;
                if ran {
                    let purged: usize = j.cleanup.values().map(|c| c.versions_purged).sum();
                    if !quiet {
                        out::progress_done();
                    }
                    println!(
                        "erasure {} was complete; its version purge ran now: {purged} noncurrent version(s) deleted",
                        j.batch
                    );
                } else {
                    println!(
                        "erasure {} is already complete ({}); nothing to do",
                        j.batch,
                        j.finished_at.unwrap_or_default()
                    );
                }
                return Ok(ExitCode::SUCCESS);
            }
            Some(j) => j.requests,
            None => anyhow::bail!(
                "no erasure with request {r} to resume (see {})",
                ws.config.paths.state.join("erasures").display()
            ),
        }
    } else if let Some(f) = &a.subjects_file {
        parse_subjects_file(f)?
    } else if a.subject.is_none() {
        vec![lethe::erasure::intake::spec_of(
            &ws,
            a.request.as_deref().unwrap_or_default(),
        )?]
    } else {
        let s = SubjectRef::parse(a.subject.as_deref().unwrap_or_default())?;
        vec![RequestSpec {
            request: a.request.clone().unwrap_or_default(),
            subject: s.subject,
            id: s.id,
        }]
    };
    let opts = EraseOptions {
        dry_run: a.dry_run,
        min_age: a.min_age.as_deref().map(parse_duration).transpose()?,
        accept_incomplete: a.accept_incomplete,
        key_file: None,
        day: a
            .day
            .as_deref()
            .map(lethe::governance::retention::parse_day)
            .transpose()?,
    };
    let quiet = a.json;
    let bars = out::StageBars::new();
    let report = match run_erase(&ws, &requests, &opts, &|m| {
        if !quiet {
            bars.show(m)
        }
    })
    .await
    {
        Ok(r) => r,
        Err(lethe::Error::Refused(why)) => {
            bars.done();
            eprintln!("lethe: refused: {why}");
            return Ok(ExitCode::from(1));
        }
        Err(lethe::Error::Store { store, message }) => {
            bars.done();
            // The request stays open: show where it stands, and how to resume it.
            let request = &requests[0].request;
            if let Some(j) = find_request(&ws, request)? {
                if a.json {
                    out::json(&serde_json::json!({
                        "open": true,
                        "failed_store": store,
                        "error": message,
                        "journal": j,
                    }))?;
                } else {
                    print_summary(&ws, &j, false)?;
                }
            }
            eprintln!(
                "lethe: store {store}: {message}\nthe request is open: nothing is claimed for {store}; fix it and run `lethe erase --resume {request}`"
            );
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e.into()),
    };
    bars.done();
    super::cluster::report_jobs(cluster.as_deref());
    let j = &report.journal;
    if a.json {
        out::json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    let held = lethe::erasure::evidence::held_now(j);
    if report.already_complete {
        if held.is_empty() {
            println!(
                "erasure {} is already complete ({}); nothing to do",
                j.batch,
                j.finished_at.clone().unwrap_or_default()
            );
        } else {
            println!(
                "erasure {} is finished but for {} part(s) a legal hold still keeps:",
                j.batch,
                held.len()
            );
            for (system, h) in &held {
                println!("  {system}: HELD by `{}` until {}", h.hold, h.until);
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    print_summary(&ws, j, report.dry_run)?;
    for (system, h) in &held {
        println!(
            "HELD {system}: legal hold `{}` until {} ({}; decided by the {}); once it has ended (from the day after {}) or the legal team removes it from governance/holds.toml, rerun `lethe erase --request {}`",
            h.hold, h.until, h.basis, h.decided_by, h.until, j.requests[0].request
        );
    }
    if !report.dry_run {
        let pending = j.stores.iter().any(|s| !s.state.settled() && !s.is_held());
        let r = &j.requests[0].request;
        for (t, until) in lethe::erasure::erase::grace_pending(j) {
            println!(
                "PENDING {t}: the snapshots the erasure replaced are kept until {until} for other writers' operations in flight ([snapshots] grace_seconds = {}); then: lethe verify --request {r}",
                j.grace_seconds
            );
        }
        if pending {
            println!(
                "next: after the pending stores' rebuilds, lethe verify --request {r}; then lethe scan --request {r} && lethe attest --request {r}"
            );
        } else {
            println!("next: lethe scan --request {r} && lethe attest --request {r}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The erasure's summary: the manifest of its request (for a batch: the steps with counts over
/// all requests), then the cleanup in one line.
fn print_summary(
    ws: &lethe::workspace::Workspace,
    j: &lethe::erasure::erase::Journal,
    dry_run: bool,
) -> anyhow::Result<()> {
    println!(
        "{} {} ({} request(s))",
        if dry_run {
            "dry run of erasure"
        } else {
            "erasure"
        },
        j.batch,
        j.requests.len()
    );
    if j.requests.len() == 1 && !dry_run {
        let m = lethe::erasure::manifest::of_request(ws, j, &j.requests[0].request, None)?;
        print_manifest(&m);
        for s in &j.steps {
            if let Some(h) = &s.recompute {
                println!("{} {}: {h}", s.action, s.table);
            }
        }
    } else {
        let mut rows: Vec<Vec<String>> = Vec::new();
        for s in j.stores.iter().filter(|s| s.before_warehouse) {
            rows.push(store_row(s));
        }
        for s in &j.steps {
            rows.push(vec![
                s.table.clone(),
                "iceberg table".into(),
                if s.is_held() {
                    format!("HELD ({})", s.action)
                } else {
                    s.action.to_string()
                },
                match s.action {
                    Action::Delete | Action::Rewrite => {
                        format!("{} value(s) of {}", s.selected_by, s.columns_text())
                    }
                    Action::Recompute => {
                        format!("pipeline {}", s.pipeline.clone().unwrap_or_default())
                    }
                    _ => String::new(),
                },
                if dry_run {
                    "-".into()
                } else {
                    out::count(s.rows)
                },
                if s.done {
                    "done".into()
                } else {
                    "planned".into()
                },
            ]);
        }
        for s in j.stores.iter().filter(|s| !s.before_warehouse) {
            rows.push(store_row(s));
        }
        print!(
            "{}",
            out::table(
                &["system", "kind", "action", "selects by", "records", "state"],
                &rows
            )
        );
    }
    if !dry_run {
        let (mut exp, mut man, mut files, mut young) = (0, 0, 0, 0);
        for c in j.cleanup.values() {
            exp += c.snapshots_expired;
            man += c.manifests_rewritten;
            files += c.files_removed;
            young += c.files_too_young;
        }
        println!(
            "cleanup of {} table(s): {exp} snapshot(s) expired, {man} manifest rewrite(s), {files} file(s) removed, {young} unreferenced file(s) younger than the minimum age left",
            j.cleanup.len()
        );
        print_logical(j);
    }
    Ok(())
}

/// The logical check after the cleanup, in one line, then every snapshot still holding rows
/// of a subject (the attestation judges; this shows what it will find).
fn print_logical(j: &lethe::erasure::erase::Journal) {
    let Some(tables) = &j.logical else { return };
    let snapshots: usize = tables.iter().map(|t| t.snapshots.len()).sum();
    let holding: Vec<String> = tables
        .iter()
        .flat_map(|t| {
            t.snapshots.iter().filter(|s| s.rows > 0).map(move |s| {
                format!(
                    "  {}: {} row(s) addressing a subject in snapshot {}{}",
                    t.table,
                    s.rows,
                    s.snapshot_id,
                    if s.current { " (current)" } else { "" }
                )
            })
        })
        .collect();
    let rewrites: std::collections::BTreeSet<&str> = j
        .steps
        .iter()
        .filter(|s| s.action == lethe::erasure::plan::Action::Rewrite)
        .map(|s| s.table.as_str())
        .collect();
    let deleted: Vec<&String> = holding
        .iter()
        .filter(|h| !rewrites.iter().any(|t| h.starts_with(&format!("  {t}:"))))
        .collect();
    println!(
        "logical check (every file read whole, every addressing column): {} table(s), {snapshots} kept snapshot(s), {}",
        tables.len(),
        if deleted.is_empty() {
            "no row of the subjects outside the rows a legal exception keeps".to_string()
        } else {
            format!(
                "{} snapshot(s) still holding rows of the subjects",
                deleted.len()
            )
        }
    );
    for h in deleted {
        println!("{h}");
    }
}

fn store_row(s: &lethe::erasure::erase::StoreStep) -> Vec<String> {
    vec![
        s.store.clone(),
        s.kind.to_string(),
        s.action.to_string(),
        String::new(),
        out::count(s.records.values().sum()),
        s.state.to_string(),
    ]
}

/// A system's residual: records (rows), then a table's erased values and files, never added.
fn residual_text(s: &lethe::erasure::manifest::System) -> String {
    let Some(r) = s.residual else {
        return "-".into();
    };
    let mut t = r.to_string();
    if let Some(v) = s.residual_values.filter(|v| *v > 0) {
        t.push_str(&format!(", {v} value(s)"));
    }
    if let Some(f) = s.residual_files.filter(|f| *f > 0) {
        t.push_str(&format!(", {f} file(s)"));
    }
    t
}

/// A manifest's systems as a table, then its residuals and hand-offs.
pub fn print_manifest(m: &lethe::erasure::manifest::Manifest) {
    let rows: Vec<Vec<String>> = m
        .systems
        .iter()
        .map(|s| {
            vec![
                s.system.clone(),
                s.kind.clone(),
                s.action.clone(),
                out::count(s.records),
                s.duration_ms.map_or("-".into(), |d| format!("{d} ms")),
                residual_text(s),
                s.state.clone(),
            ]
        })
        .collect();
    println!(
        "manifest of {} (subject {} {}): {}",
        m.request, m.subject_kind, m.subject_ref, m.status
    );
    let w = &m.workflow;
    if let (Some(kind), Some(received), Some(due)) = (w.kind, w.received, w.due) {
        println!(
            "{kind} request received {received}, due {due}{}{}{}",
            w.controller
                .as_ref()
                .map(|c| format!(", instructed by {c}"))
                .unwrap_or_default(),
            w.reference
                .as_ref()
                .map(|r| format!(" (reference {r})"))
                .unwrap_or_default(),
            w.state.map(|s| format!("; {s}")).unwrap_or_default()
        );
    }
    for e in &w.extensions {
        println!(
            "extended by {} month(s) on {}: due {} (was {}); reason: {}",
            e.months, e.recorded_on, e.due_after, e.due_before, e.reason
        );
    }
    print!(
        "{}",
        out::table(
            &[
                "system", "kind", "action", "records", "took", "residual", "state"
            ],
            &rows
        )
    );
    for r in &m.residuals {
        println!(
            "residual: {} ({}; ends: {}; control: {})",
            r.place, r.basis, r.expires, r.control
        );
    }
    for h in &m.hand_offs {
        println!(
            "hand-off: {} trained on {} -> {} (not erased by lethe)",
            h.artifact,
            h.trained_on.join(", "),
            h.owner
        );
    }
    if let Some(r) = &w.refusal {
        println!("{r}");
    }
}

impl EraseArgs {
    /// One subject, text output.
    pub fn plain(subject: &str, request: &str, min_age: &str) -> Self {
        EraseArgs {
            subject: Some(subject.into()),
            request: Some(request.into()),
            subjects_file: None,
            resume: None,
            dry_run: false,
            min_age: Some(min_age.into()),
            accept_incomplete: false,
            day: None,
            json: false,
            engine: Default::default(),
        }
    }
}
