//! `lethe explain` and `lethe lineage`.

use std::path::Path;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use lethe::erasure::explain::explain_with;
use lethe::erasure::plan::{self, Action, Inventory, Verdict};
use lethe::governance::subjects::SubjectRef;

use crate::out;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    /// A readable table.
    Text,
    /// A stable JSON document: steps, coverage, verdict.
    Json,
    /// The plan's lineage subgraph for Graphviz.
    Dot,
}

/// Arguments of `lethe explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The subject, as NAME=ID (e.g. learner=3590); NAME is a subject of governance/subjects.toml.
    #[arg(long)]
    subject: String,
    /// Print JSON (same as --format json).
    #[arg(long)]
    json: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

#[derive(Debug, Subcommand)]
pub enum LineageCommand {
    /// Catalog tables no lineage produces and no declaration names as a source.
    ///
    /// A table here was written by something that sent no lineage: an erasure plan can't see
    /// copies it holds. Declare real sources with `source = "..."` in metadata.toml.
    Unaccounted {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub async fn explain(a: ExplainArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let subject = SubjectRef::parse(&a.subject)?;
    let format = if a.json { Format::Json } else { a.format };
    let e = explain_with(&ws, &subject, matches!(format, Format::Dot)).await?;
    let p = &e.plan;
    match format {
        Format::Dot => print!("{}", p.dot),
        Format::Json => out::json(&serde_json::json!({
            "subject": p.subject,
            "lineage_since": p.lineage_since,
            "steps": p.steps,
            "coverage": p.coverage,
            "verdict": e.verdict,
            "plan_verdict": p.verdict,
            "blocked": p.blocked,
            "searched": e.searched,
            "stores": e.stores,
            "history": e.history,
            "store_blockers": e.store_blockers,
            "warnings": e.warnings,
        }))?,
        Format::Text => {
            println!("erasure plan for {}={}", subject.subject, subject.id);
            let rows: Vec<Vec<String>> = p
                .steps
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let what = match s.action {
                        Action::Delete => format!("where {}", selection_text(s)),
                        Action::Rewrite => format!(
                            "keep rows where {}, null {}",
                            selection_text(s),
                            s.erase_columns.join(", ")
                        ),
                        Action::Recompute => {
                            format!("rerun pipeline {}", s.pipeline.clone().unwrap_or_default())
                        }
                        Action::NoAction | Action::Unresolved => {
                            s.reason.clone().unwrap_or_default()
                        }
                    };
                    vec![
                        (i + 1).to_string(),
                        s.table.clone(),
                        s.action.to_string(),
                        what,
                        s.via.clone(),
                    ]
                })
                .collect();
            print!(
                "{}",
                out::table(
                    &[
                        "#",
                        "table",
                        "action",
                        "column and values, or reason",
                        "via"
                    ],
                    &rows
                )
            );
            for s in p.steps.iter().filter(|s| s.action == Action::Rewrite) {
                println!(
                    "reason recorded for {}: {}",
                    s.table,
                    s.reason.clone().unwrap_or_default()
                );
            }
            let c = &p.coverage;
            println!(
                "coverage: {} discovered, {} resolved automatically, {} exempt, {} unresolved ({:.1}%)",
                c.discovered, c.resolved, c.exempt, c.unresolved, c.percent
            );
            for (t, why) in &p.blocked {
                for w in why {
                    println!("blocked by {t}: {w}");
                }
            }
            for (t, h) in &e.history {
                println!(
                    "history of {t}: a twin without the subject for {} kept snapshot(s), {} file(s) rewritten ({} bytes):",
                    h.twins.len(),
                    h.files_rewritten,
                    h.bytes_rewritten
                );
                for w in &h.twins {
                    println!(
                        "  snapshot {} ({}): {} row(s) of the subject, {} file(s), {} delete file(s) resolved",
                        w.original,
                        if w.refs.is_empty() {
                            w.kept_because.clone()
                        } else {
                            w.refs.join(", ")
                        },
                        w.rows_matched,
                        w.files_rewritten,
                        w.delete_files_resolved
                    );
                }
            }
            if !e.stores.is_empty() {
                let rows: Vec<Vec<String>> = e
                    .stores
                    .iter()
                    .map(|s| {
                        vec![
                            s.store.clone(),
                            s.kind.to_string(),
                            s.action.to_string(),
                            if s.before_warehouse {
                                "before the tables".into()
                            } else {
                                "after the tables".into()
                            },
                            if s.mechanism.is_empty() {
                                s.state.to_string()
                            } else {
                                s.mechanism.clone()
                            },
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    out::table(&["store", "kind", "action", "when", "how"], &rows)
                );
            }
            for w in &e.warnings {
                println!("the attestation would not be COMPLETE: {w}");
            }
            println!(
                "verdict: {}",
                serde_json::to_value(e.verdict)?.as_str().unwrap_or("?")
            );
        }
    }
    Ok(match e.verdict {
        Verdict::Complete => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

/// The columns that select a step's rows with their values, OR-ed:
/// `anonymous_id in [a-7] or session_id in [a-7#1, a-7#2]`.
fn selection_text(s: &plan::Step) -> String {
    let mut parts = vec![format!(
        "{} in [{}]",
        s.column.clone().unwrap_or_default(),
        s.values.join(", ")
    )];
    parts.extend(
        s.also
            .iter()
            .map(|a| format!("{} in [{}]", a.column, a.values.join(", "))),
    );
    parts.join(" or ")
}

pub async fn lineage(c: LineageCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let LineageCommand::Unaccounted { json } = c;
    let gov = ws.governance()?;
    let inv = Inventory::load(&ws.warehouse).await?;
    let graph = plan::load_lineage(&ws.config.paths.lineage, &inv)?;
    let list = plan::unaccounted(&inv, &gov, &graph);
    if json {
        out::json(&list)?;
    } else if list.is_empty() {
        println!("every catalog table is produced by lineage or declared as a source");
    } else {
        println!("tables no lineage produces and no declaration names as a source:");
        for t in &list {
            println!("  {t}");
        }
    }
    Ok(if list.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

impl ExplainArgs {
    /// Text output for one subject.
    pub fn plain(subject: &str) -> Self {
        ExplainArgs {
            subject: subject.into(),
            json: false,
            format: Format::Text,
        }
    }
}
