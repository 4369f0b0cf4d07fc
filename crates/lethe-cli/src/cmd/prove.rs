//! `lethe scan`, `lethe attest`, `lethe register`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use lethe::erasure::case::{CaseFile, RequestSpec, read_case};
use lethe::erasure::erase::{find_request, prepare};
use lethe::erasure::register::default_key_file;
use lethe::erasure::register::{Register, RegisterKey, SuppressMode};
use lethe::governance::subjects::SubjectRef;

use crate::out;

/// Arguments of `lethe scan`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["request", "subject", "traces", "subjects_file"])))]
pub struct ScanArgs {
    /// Scan for the traces an erasure noted (its case file).
    #[arg(long)]
    request: Option<String>,
    /// Scan for a subject before any erasure (NAME=ID): traces are computed from the plan.
    #[arg(long)]
    subject: Option<String>,
    /// Scan for the traces in a case file.
    #[arg(long, value_name = "FILE")]
    traces: Option<PathBuf>,
    /// Scan for many subjects before their erasure, in one pass: one `REQUEST NAME=ID` per
    /// line, as `lethe erase --subjects-file` (a week's batch, checked before it is erased).
    #[arg(long, value_name = "FILE")]
    subjects_file: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: super::cluster::EngineArgs,
}

/// Arguments of `lethe attest`.
#[derive(Debug, Args)]
pub struct AttestArgs {
    /// The request to attest.
    #[arg(long)]
    request: String,
    /// Print the attestation as JSON.
    #[arg(long)]
    json: bool,
    /// Also write it as one self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Keep the case file's values even when the attestation is COMPLETE.
    #[arg(long)]
    keep_case_file: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Mode {
    /// Leave the rows of erased subjects out.
    Drop,
    /// Keep them with their identifier (and --null columns) set to null.
    Tombstone,
}

#[derive(Debug, Subcommand)]
pub enum RegisterCommand {
    /// Hash every identifier value in every table and report rows of erased subjects (an
    /// incident: exit 1), except in tables a legal exception keeps. Run after loads, restores
    /// and rebuilds.
    Check {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Filter a batch (Parquet or CSV) against the register before it is loaded.
    Suppress {
        /// The batch to filter.
        #[arg(long)]
        input: PathBuf,
        /// Where to write the filtered batch (same format).
        #[arg(long)]
        output: PathBuf,
        /// drop or tombstone.
        #[arg(long, value_enum)]
        mode: Mode,
        /// The subject kind (default: the only one in subjects.toml).
        #[arg(long)]
        subject: Option<String>,
        /// The identifier column (default: the subject's root identifier's name).
        #[arg(long)]
        column: Option<String>,
        /// With tombstone: further columns to set to null.
        #[arg(long = "null", value_name = "COLUMN")]
        null_columns: Vec<String>,
        /// Where to keep the rows of subjects under a restriction (same format, mode 0600):
        /// they are held apart, not loaded and not dropped, until the restriction is lifted.
        /// Without it, a batch holding such rows is refused and nothing is written.
        #[arg(long, value_name = "FILE")]
        held: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the register's entries (request IDs and hashes only).
    List,
    /// After a restore (or a reload from a source nobody erased): delete again every erased
    /// subject the register names, from every table and registered store whose identifier
    /// hashes to a register entry, then clean up the tables changed (expiry, manifest rewrite,
    /// sweep), and find again in what it touched. The control backups' residual entries name.
    /// Reports counts and request IDs, and per table and store how many were found again
    /// after the deletes; an incident is repaired only when that finds nothing. Exit 0 when
    /// nothing of an erased subject is left, 1 when anything is still found (always, for a
    /// --dry-run that finds something).
    Replay {
        /// Report what would be deleted; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// The sweep's minimum file age (default: governance/retention.toml [sweep]).
        #[arg(long, value_parser = super::duration_flag)]
        min_age: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

async fn cases_for(
    ws: &lethe::workspace::Workspace,
    a: &ScanArgs,
) -> anyhow::Result<Vec<CaseFile>> {
    if let Some(r) = &a.request {
        // An erasure's case file, or a restriction's (its traces, noted when it was recorded).
        if find_request(ws, r)?.is_none()
            && lethe::requests::Requests::in_state(&ws.config.paths.state)
                .find(r)?
                .is_none_or(|x| x.kind != lethe::requests::Kind::Restriction)
        {
            anyhow::bail!("no erasure with request {r}");
        }
        return Ok(vec![read_case(ws, r)?]);
    }
    if let Some(f) = &a.traces {
        let text = std::fs::read_to_string(f)?;
        return Ok(vec![serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!("{}: not a case file: {e}", f.display())
        })?]);
    }
    let specs = match &a.subjects_file {
        Some(f) => lethe::erasure::case::parse_subjects_file(f)?,
        None => {
            let s = SubjectRef::parse(a.subject.as_deref().unwrap_or_default())?;
            vec![RequestSpec {
                request: "(before erasure)".into(),
                subject: s.subject,
                id: s.id,
            }]
        }
    };
    let gov = ws.governance()?;
    let key = RegisterKey::load(default_key_file(ws).as_deref()).ok();
    let p = prepare(ws, &gov, &specs, key.as_ref(), &|_| {}).await?;
    Ok(p.cases)
}

pub async fn scan(a: ScanArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let (engines, cluster) = a.engine.engines(&ws)?;
    let ws = ws.with_engines(engines);
    let cases = cases_for(&ws, &a).await?;
    let quiet = a.json;
    let r = lethe::erasure::prove::prove(&ws, &cases, &out::progress_unless(quiet)).await?;
    out::progress_done();
    super::cluster::report_jobs(cluster.as_deref());
    if a.json {
        out::json(&r)?;
    } else {
        let rows: Vec<Vec<String>> = r
            .tables
            .iter()
            .map(|(t, c)| {
                vec![
                    t.clone(),
                    c.files_read.to_string(),
                    c.files_holding.to_string(),
                    c.unreadable.to_string(),
                ]
            })
            .collect();
        print!(
            "{}",
            out::table(
                &["table", "files read", "holding the subject", "unreadable"],
                &rows
            )
        );
        for h in &r.hits {
            println!(
                "  {} [{}] {} {} (x{})",
                h.file, h.place, h.trace, h.detail, h.count
            );
        }
        for (f, why) in &r.unreadable {
            println!("  unreadable: {f}: {why}");
        }
        println!(
            "files read: {}, bytes: {}, files holding the subject: {}, unreadable: {} -> {}",
            r.files_read,
            r.bytes_read,
            r.files_holding,
            r.unreadable.len(),
            if r.is_clean() {
                "CLEAN"
            } else if r.files_holding > 0 {
                "HOLDING"
            } else if r.unreadable.is_empty() {
                "HOLDING (noncurrent versions)"
            } else {
                "INCOMPLETE"
            }
        );
        if let Some(v) = &r.versions
            && v.versioned
        {
            println!(
                "versioned bucket: {} noncurrent version(s) read, {} holding the subject, {} delete marker(s)",
                v.noncurrent_read, v.noncurrent_holding, v.delete_markers
            );
        }
    }
    Ok(if r.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub async fn attest(a: AttestArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let quiet = a.json;
    let (att, _) = lethe::erasure::attest::attest(
        &ws,
        &a.request,
        !a.keep_case_file,
        &out::progress_unless(quiet),
    )
    .await?;
    out::progress_done();
    if let Some(f) = &a.html {
        let j = match find_request(&ws, &a.request)?.and_then(|j| j.plan) {
            Some(p) => p,
            // A restriction's manifest has no erasure plan.
            None if att.manifest.workflow.restriction.is_some() => lethe::erasure::plan::Plan {
                subject: att.subject.get("kind").cloned().unwrap_or_default(),
                lineage_since: None,
                steps: Vec::new(),
                coverage: Default::default(),
                verdict: lethe::erasure::plan::Verdict::Complete,
                blocked: Default::default(),
                dot: String::new(),
            },
            None => anyhow::bail!("no plan"),
        };
        std::fs::write(f, lethe::erasure::attest::html(&att, &j))?;
    }
    if a.json {
        out::json(&att)?;
    } else {
        println!(
            "attestation of {} ({} {})",
            att.request,
            att.subject.get("kind").cloned().unwrap_or_default(),
            att.subject
                .get("register_hash")
                .cloned()
                .unwrap_or_default()
        );
        let rows: Vec<Vec<String>> = att
            .tables
            .iter()
            .map(|t| {
                vec![
                    t.table.clone(),
                    t.action.to_string(),
                    t.rows_affected.to_string(),
                    t.commits
                        .iter()
                        .map(|c| c.to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                    format!(
                        "{} rows, {} files",
                        t.residual.rows, t.residual.files_holding
                    ),
                ]
            })
            .collect();
        if att.manifest.workflow.restriction.is_none() {
            print!(
                "{}",
                out::table(&["table", "action", "rows", "commits", "residual"], &rows)
            );
            println!(
                "cleanup: {}",
                att.cleanup
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            println!(
                "scan: {}",
                att.scan
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            println!("searched for: {}", att.searched.traces.join(", "));
            println!(
                "mentions for review: {}",
                att.mentions.values().map(|m| m.rows).sum::<u64>()
            );
            for r in &att.residuals {
                println!(
                    "outside the warehouse: {} ({}; ends {}; control: {})",
                    r.place, r.basis, r.expires, r.control
                );
            }
        }
        super::erase::print_manifest(&att.manifest);
        for c in &att.manifest.workflow.certifications {
            println!("certified {} ({})", c.at, c.verdict);
        }
        for r in &att.verdict.remaining {
            println!("remains: {r}");
        }
        println!("storage: {}", att.verdict.storage);
        println!(
            "logical erasure: {}; physical purge: {}",
            att.verdict.logical, att.verdict.physical
        );
    }
    Ok(if att.is_complete() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub async fn register(c: RegisterCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    match c {
        RegisterCommand::List => {
            for e in Register::in_state(&ws.config.paths.state).entries()? {
                println!("{}  {}  {}  {}", e.request, e.subject, e.hash, e.at);
            }
            Ok(ExitCode::SUCCESS)
        }
        RegisterCommand::Replay {
            dry_run,
            min_age,
            json,
        } => {
            let key = RegisterKey::load(default_key_file(&ws).as_deref())?;
            let opts = lethe::erasure::replay::ReplayOptions {
                dry_run,
                min_age: min_age
                    .as_deref()
                    .map(lethe_iceberg::clock::parse_duration)
                    .transpose()?,
            };
            let bars = out::StageBars::new();
            let r = lethe::erasure::replay::replay(&ws, &key, &opts, &|m| {
                if !json {
                    bars.show(m)
                }
            })
            .await?;
            bars.done();
            if json {
                out::json(&r)?;
            } else {
                if r.found_nothing() {
                    println!("no table or store holds an erased subject: nothing to replay");
                }
                let verb = if dry_run { "would delete" } else { "deleted" };
                let again = |n: Option<u64>| match n {
                    None => String::new(),
                    Some(0) => "; found again afterwards: 0".to_string(),
                    Some(n) => format!("; STILL FOUND afterwards: {n}"),
                };
                for t in &r.tables {
                    let i = &t.incident;
                    println!(
                        "{}.{}: {verb} {} row(s) of erased subjects (requests {}){}",
                        i.table,
                        i.column,
                        i.rows,
                        i.requests.join(", "),
                        again(t.found_again)
                    );
                }
                for s in &r.stores {
                    println!(
                        "store {}: {verb} {} record(s) of erased subjects (requests {}){}",
                        s.store,
                        s.records,
                        s.requests.join(", "),
                        again(s.found_again)
                    );
                }
                for (s, why) in &r.not_replayable {
                    println!("store {s}: can't be matched against the register: {why}");
                }
                if !r.cleaned_up.is_empty() {
                    println!("cleaned up: {}", r.cleaned_up.join(", "));
                }
                if r.repaired {
                    println!(
                        "repaired: the check after the replay finds nothing of an erased subject"
                    );
                } else if !dry_run && !r.found_nothing() {
                    println!(
                        "NOT REPAIRED: the check after the replay still finds {} row(s) or record(s) of erased subjects",
                        r.still_found()
                    );
                }
            }
            Ok(if r.clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        RegisterCommand::Check { json } => {
            let key = RegisterKey::load(default_key_file(&ws).as_deref())?;
            let incidents = lethe::erasure::register::check(&ws, &key).await?;
            let in_stores = lethe::erasure::replay::check_stores(&ws, &key).await?;
            if json {
                let mut all: Vec<serde_json::Value> = incidents
                    .iter()
                    .map(serde_json::to_value)
                    .collect::<Result<_, _>>()?;
                for s in &in_stores {
                    all.push(serde_json::json!({
                        "store": s.store,
                        "rows": s.records,
                        "requests": s.requests,
                    }));
                }
                out::json(&all)?;
            } else if incidents.is_empty() && in_stores.is_empty() {
                println!("no table or store holds a row of an erased subject");
            } else {
                println!(
                    "INCIDENT: rows of erased subjects are back (run `lethe register replay`)"
                );
                for i in &incidents {
                    println!(
                        "  {}.{}: {} row(s) (requests {})",
                        i.table,
                        i.column,
                        i.rows,
                        i.requests.join(", ")
                    );
                }
                for s in &in_stores {
                    println!(
                        "  store {}: {} record(s) (requests {})",
                        s.store,
                        s.records,
                        s.requests.join(", ")
                    );
                }
            }
            Ok(if incidents.is_empty() && in_stores.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        RegisterCommand::Suppress {
            input,
            output,
            mode,
            subject,
            column,
            null_columns,
            held,
            json,
        } => {
            let gov = ws.governance()?;
            let subject = match subject {
                Some(s) => s,
                None => {
                    let names: Vec<&String> = gov.subjects.value.keys().collect();
                    match names.as_slice() {
                        [one] => (*one).clone(),
                        _ => anyhow::bail!(
                            "name the subject kind with --subject (subjects: {})",
                            names
                                .iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    }
                }
            };
            let column = match column {
                Some(c) => c,
                None => gov.subjects.get(&subject)?.root()?.1,
            };
            let key = RegisterKey::load(default_key_file(&ws).as_deref())?;
            let hashes = Register::in_state(&ws.config.paths.state).hashes(&subject)?;
            let batches = lethe::batchio::read_batches(&input)?;
            let mode = match mode {
                Mode::Drop => SuppressMode::Drop,
                Mode::Tombstone => SuppressMode::Tombstone,
            };
            let (kept, stats) = lethe::erasure::register::suppress(
                &batches,
                &key,
                &hashes,
                &subject,
                &column,
                mode,
                &null_columns,
            )?;
            let restricted =
                lethe::requests::scope::restricted_hashes(&ws.config.paths.state, &subject)?;
            let (kept, held_rows) = lethe::requests::scope::hold_restricted(
                &kept,
                &key,
                &restricted,
                &subject,
                &column,
            )?;
            let held_n = lethe::requests::scope::rows(&held_rows);
            if held_n > 0 {
                let Some(h) = &held else {
                    anyhow::bail!(
                        "{held_n} row(s) belong to subjects under a restriction: name --held FILE to keep them apart (they must not be loaded, nor dropped); nothing was written"
                    );
                };
                // Private from the moment it exists: never written readable, then narrowed.
                lethe::batchio::replace_batches(h, &held_rows, lethe::keys::FileMode::Private)?;
            }
            lethe::batchio::write_batches(&output, &kept)?;
            if json {
                let mut v = serde_json::to_value(&stats)?;
                v["held"] = held_n.into();
                v["rows_out"] = lethe::requests::scope::rows(&kept).into();
                out::json(&v)?;
            } else {
                println!(
                    "{} row(s) in, {} out, {held_n} of restricted subjects held apart, {} of erased subjects {}",
                    stats.rows_in,
                    lethe::requests::scope::rows(&kept),
                    stats.suppressed,
                    if mode == SuppressMode::Drop {
                        "dropped"
                    } else {
                        "tombstoned"
                    }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

impl ScanArgs {
    /// Scan for a request's traces, text output.
    pub fn request(request: &str) -> Self {
        ScanArgs {
            request: Some(request.into()),
            subject: None,
            traces: None,
            subjects_file: None,
            json: false,
            engine: Default::default(),
        }
    }
}

impl AttestArgs {
    /// Text output, optionally with an HTML page.
    pub fn plain(request: &str, html: Option<PathBuf>) -> Self {
        AttestArgs {
            request: request.into(),
            json: false,
            html,
            keep_case_file: false,
        }
    }
}
