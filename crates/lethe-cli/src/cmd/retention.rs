//! `lethe retention due|apply`.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use lethe::governance::retention::parse_day;
use lethe::lifecycle::retention;

use crate::out;

#[derive(Debug, Subcommand)]
pub enum RetentionCommand {
    /// Per rule: the first day kept, rows due and rows in the table, for a given day.
    Due {
        /// The day the rules are applied for (YYYY-MM-DD). Never the clock; a day after today
        /// needs --look-ahead.
        #[arg(long)]
        day: String,
        /// Allow a day after today: what the rules will make due then (reports only).
        #[arg(long)]
        look_ahead: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete the rows due on a given day, one rule (one commit) at a time.
    ///
    /// Each commit records the rule's table and the day in its snapshot summary
    /// (retention-rule, retention-day). Running again for the same day deletes nothing and
    /// commits nothing. The old rows stay in older snapshots until `lethe expire` and
    /// `lethe sweep` remove them.
    Apply {
        /// The day the rules are applied for (YYYY-MM-DD). Never the clock; a day after today
        /// is refused (a dry run may look ahead with --look-ahead).
        #[arg(long)]
        day: String,
        /// Report what would be deleted; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// With --dry-run: allow a day after today.
        #[arg(long, requires = "dry_run")]
        look_ahead: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(c: RetentionCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let gov = ws.governance()?;
    match c {
        RetentionCommand::Due {
            day,
            look_ahead,
            json,
        } => {
            let day = parse_day(&day)?;
            retention::check_day(day, ws.clock.now().date_naive(), false, look_ahead)?;
            let due = retention::due(&ws.warehouse, &gov.retention, day).await?;
            if json {
                out::json(&due)?;
            } else {
                let rows: Vec<Vec<String>> = due
                    .iter()
                    .map(|d| {
                        vec![
                            d.table.clone(),
                            d.rule.clone(),
                            d.cutoff.to_string(),
                            out::count(d.rows_due),
                            out::count(d.rows_in_table),
                        ]
                    })
                    .collect();
                println!("retention on {day}");
                print!(
                    "{}",
                    out::table(
                        &["table", "rule", "kept from", "rows due", "rows in table"],
                        &rows
                    )
                );
            }
        }
        RetentionCommand::Apply {
            day,
            dry_run,
            look_ahead,
            json,
        } => {
            let day = parse_day(&day)?;
            retention::check_day(day, ws.clock.now().date_naive(), !dry_run, look_ahead)?;
            let applied = retention::apply(&ws.warehouse, &gov.retention, day, dry_run).await?;
            if json {
                out::json(&applied)?;
            } else {
                let rows: Vec<Vec<String>> = applied
                    .iter()
                    .map(|a| {
                        vec![
                            a.table.clone(),
                            out::count(a.rows_deleted),
                            a.files_rewritten.to_string(),
                            a.files_dropped.to_string(),
                            a.snapshot_id.map_or(
                                if dry_run {
                                    "(dry run)".into()
                                } else {
                                    "nothing to commit".into()
                                },
                                |s| s.to_string(),
                            ),
                        ]
                    })
                    .collect();
                println!(
                    "retention {} for {day}",
                    if dry_run { "dry run" } else { "applied" }
                );
                print!(
                    "{}",
                    out::table(
                        &[
                            "table",
                            "rows deleted",
                            "files rewritten",
                            "files dropped",
                            "snapshot"
                        ],
                        &rows
                    )
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
