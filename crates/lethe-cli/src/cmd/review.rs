//! `lethe review`: what waits on a person, and the decisions reviewers record.

use std::path::Path;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use lethe::erasure::review::{Decide, Outcome, Pending, decide, pending};

use crate::out;

/// Arguments of `lethe review`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ReviewArgs {
    #[command(subcommand)]
    command: Option<ReviewCommand>,
    /// The request to list (default: every erasure whose case file is still held, i.e. not
    /// yet attested COMPLETE).
    #[arg(long)]
    request: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum ReviewCommand {
    /// Record a reviewer's decision on a mention: another row whose text quotes the subject.
    ///
    /// `redacted`: the row was edited and no longer quotes the subject (lethe checks it before
    /// recording). `not-the-subject`: the text names someone else. `kept`: the row stays as
    /// it is, on the --basis given (e.g. another person's complaint that quotes the email).
    /// A mention decided `kept` or `not-the-subject` no longer keeps the request open; the
    /// attestation lists every decision. A later decision on the same row replaces the
    /// earlier one.
    Decide(DecideArgs),
}

/// Arguments of `lethe review decide`.
#[derive(Debug, Args)]
struct DecideArgs {
    /// The request whose subject the row mentions.
    #[arg(long)]
    request: String,
    /// The table holding the row (`ns.table`).
    #[arg(long)]
    table: String,
    /// The row, exactly as `lethe review` lists it (`ticket_id=T-17`, or `row 12`).
    #[arg(long)]
    row: String,
    /// redacted | not-the-subject | kept
    #[arg(long, value_name = "DECISION")]
    decision: String,
    /// Why (required for `kept`): the basis on which the row stays.
    #[arg(long)]
    basis: Option<String>,
    /// The reviewer's role (a role, never a person's name): `privacy officer`.
    #[arg(long)]
    role: String,
    /// The day decided (default: today).
    #[arg(long, value_name = "YYYY-MM-DD")]
    day: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub async fn review(a: ReviewArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    if let Some(ReviewCommand::Decide(d)) = a.command {
        return decide_one(&ws, d).await;
    }
    let requests: Vec<String> = match &a.request {
        Some(r) => vec![r.clone()],
        None => open_requests(&ws)?,
    };
    let mut all: Vec<Pending> = Vec::new();
    for r in &requests {
        all.push(pending(&ws, r).await?);
    }
    let waiting = all.iter().any(|p| !p.is_empty());
    if a.json {
        out::json(&all)?;
    } else {
        print_pending(&all);
    }
    Ok(if waiting {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Every request of an erasure whose case file still holds values (not yet attested
/// COMPLETE).
fn open_requests(ws: &lethe::workspace::Workspace) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for j in lethe::erasure::erase::journals(ws)? {
        for r in &j.requests {
            if let Ok(c) = lethe::erasure::case::read_case(ws, &r.request)
                && !c.destroyed
            {
                out.push(r.request.clone());
            }
        }
    }
    Ok(out)
}

fn print_pending(all: &[Pending]) {
    if all.is_empty() {
        println!("no erasure waits on a person");
        return;
    }
    for p in all {
        if p.is_empty() {
            println!("{}: nothing waits on a person", p.request);
            continue;
        }
        println!("{}:", p.request);
        if !p.mentions.is_empty() {
            let rows: Vec<Vec<String>> = p
                .mentions
                .iter()
                .map(|m| {
                    vec![
                        m.table.clone(),
                        m.row.clone(),
                        m.columns.join(", "),
                        m.decision.as_ref().map_or("undecided".to_string(), |d| {
                            format!(
                                "{} by the {} on {}{}",
                                d.outcome,
                                d.role,
                                d.day,
                                d.basis
                                    .as_ref()
                                    .map(|b| format!(": {b}"))
                                    .unwrap_or_default()
                            )
                        }),
                    ]
                })
                .collect();
            print!(
                "{}",
                out::table(&["table", "row", "mentioned in", "decision"], &rows)
            );
        }
        for (t, n) in &p.unlisted {
            println!("  {t}: {n} more mention(s) than listed");
        }
        for h in &p.held {
            println!("  {h}");
        }
        for s in &p.stores {
            println!("  {s}");
        }
        if p.undecided() > 0 {
            println!(
                "  decide each mention: lethe review decide --request {} --table T --row KEY --decision kept|not-the-subject|redacted --role ROLE [--basis ...]",
                p.request
            );
        }
    }
}

async fn decide_one(ws: &lethe::workspace::Workspace, d: DecideArgs) -> anyhow::Result<ExitCode> {
    let day = match &d.day {
        Some(x) => x
            .parse::<chrono::NaiveDate>()
            .map_err(|_| anyhow::anyhow!("--day `{x}` is not a date (YYYY-MM-DD)"))?,
        None => ws.clock.now().date_naive(),
    };
    let outcome: Outcome = d.decision.parse()?;
    let reviews = decide(
        ws,
        &Decide {
            request: d.request.clone(),
            table: d.table.clone(),
            row: d.row.clone(),
            outcome,
            basis: d.basis.clone(),
            role: d.role.clone(),
            day,
        },
    )
    .await?;
    if d.json {
        out::json(&reviews)?;
    } else {
        println!(
            "recorded: {} {} {} by the {} on {day}",
            d.table,
            d.row,
            outcome,
            d.role.trim()
        );
        println!(
            "next: lethe attest --request {} (a mention kept or not the subject no longer keeps it open)",
            d.request
        );
    }
    Ok(ExitCode::SUCCESS)
}
