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
#[command(group(clap::ArgGroup::new("who").required(true).args(["subject", "subjects_file", "resume"])))]
pub struct EraseArgs {
    /// The subject, as NAME=ID (e.g. learner=3590).
    #[arg(long, requires = "request")]
    subject: Option<String>,
    /// The request ID recorded in every commit and in the register (e.g. erasure-0001).
    #[arg(long)]
    request: Option<String>,
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
    #[arg(long)]
    min_age: Option<String>,
    /// Erase what can be erased although some tables are UNRESOLVED.
    #[arg(long)]
    accept_incomplete: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub async fn erase(a: EraseArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let requests: Vec<RequestSpec> = if let Some(r) = &a.resume {
        match find_request(&ws, r)? {
            Some(j) if j.finished_at.is_some() => {
                println!(
                    "erasure {} is already complete ({}); nothing to do",
                    j.batch,
                    j.finished_at.unwrap_or_default()
                );
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
    };
    let quiet = a.json;
    let report = match run_erase(&ws, &requests, &opts, &|m| {
        if !quiet {
            out::progress(m)
        }
    })
    .await
    {
        Ok(r) => r,
        Err(lethe::Error::Refused(why)) => {
            out::progress_done();
            eprintln!("lethe: refused: {why}");
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e.into()),
    };
    out::progress_done();
    let j = &report.journal;
    if a.json {
        out::json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    if report.already_complete {
        println!(
            "erasure {} is already complete ({}); nothing to do",
            j.batch,
            j.finished_at.clone().unwrap_or_default()
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} {} ({} request(s))",
        if report.dry_run {
            "dry run of erasure"
        } else {
            "erasure"
        },
        j.batch,
        j.requests.len()
    );
    let rows: Vec<Vec<String>> = j
        .steps
        .iter()
        .map(|s| {
            vec![
                s.table.clone(),
                s.action.to_string(),
                match s.action {
                    Action::Delete | Action::Rewrite => format!(
                        "{} value(s) of {}",
                        s.values.len(),
                        s.column.clone().unwrap_or_default()
                    ),
                    Action::Recompute => {
                        format!("pipeline {}", s.pipeline.clone().unwrap_or_default())
                    }
                    _ => String::new(),
                },
                if report.dry_run {
                    "-".into()
                } else {
                    out::count(s.rows)
                },
                s.snapshot_id.map_or("-".into(), |x| x.to_string()),
            ]
        })
        .collect();
    print!(
        "{}",
        out::table(&["table", "action", "selects", "rows", "snapshot"], &rows)
    );
    if !report.dry_run {
        let (mut exp, mut man, mut files, mut young) = (0, 0, 0, 0);
        for c in j.cleanup.values() {
            exp += c.snapshots_expired;
            man += c.manifests_rewritten;
            files += c.files_removed;
            young += c.files_too_young;
        }
        println!(
            "cleanup: {exp} snapshot(s) expired, {man} manifest rewrite(s), {files} file(s) removed, {young} unreferenced file(s) younger than the minimum age left"
        );
        println!(
            "next: lethe scan --request {} && lethe attest --request {}",
            j.requests[0].request, j.requests[0].request
        );
    }
    Ok(ExitCode::SUCCESS)
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
            json: false,
        }
    }
}
